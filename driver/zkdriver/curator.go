package zkdriver

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-locker/locker/driver"
)

// Layout selects how the driver names its lock nodes, and so which other
// ZooKeeper clients share its queues (see "Apache Curator").
type Layout int

const (
	// LayoutLocker, the default, is the driver's own: "_c_<owner>-w-<seq>",
	// "_c_<owner>-r-<seq>", "_c_<owner>.<limit>.<weight>-r-<seq>".
	LayoutLocker Layout = iota
	// LayoutCuratorMutex names nodes as Curator's InterProcessMutex does,
	// "_c_<owner>-lock-<seq>". Shared and counted requests fail with
	// ErrCuratorLayout.
	LayoutCuratorMutex
	// LayoutCuratorReadWrite names nodes as Curator's
	// InterProcessReadWriteLock does, "_c_<owner>-__WRIT__<seq>" and
	// "_c_<owner>-__READ__<seq>". Counted requests fail with
	// ErrCuratorLayout.
	LayoutCuratorReadWrite
)

// String returns the layout's name.
func (l Layout) String() string {
	switch l {
	case LayoutLocker:
		return "locker"
	case LayoutCuratorMutex:
		return "curator-mutex"
	case LayoutCuratorReadWrite:
		return "curator-readwrite"
	}
	return "Layout(" + strconv.Itoa(int(l)) + ")"
}

// ErrCuratorLayout is wrapped, with errors.ErrUnsupported, by the
// permanent errors of requests a Curator layout cannot express: counted
// ones (a Semaphore's), and shared ones in LayoutCuratorMutex. In
// LayoutLocker it is wrapped by the permanent error of a request that
// finds a Curator client's lock node in its key's queue (see the package
// documentation). Nothing is left held.
var ErrCuratorLayout = errors.New("zkdriver: the request has no form in the Curator layout")

// checkForeignLayout returns an error when q, the queue under parent of a
// driver in LayoutLocker, holds a node of a Curator lock recipe: Curator
// orders the nodes it does not name itself after its own, so its client
// and this one could hold the key together.
func (d *Driver) checkForeignLayout(parent string, q queue) error {
	if d.layout != LayoutLocker {
		return nil
	}
	for _, c := range q {
		if c.curator {
			return driver.Permanent(fmt.Errorf("%w: %s holds the Apache Curator lock node %s; Curator does not order this driver's nodes, so both could hold the key: use the Curator layout (Options.Layout LayoutCuratorMutex for an InterProcessMutex, LayoutCuratorReadWrite for an InterProcessReadWriteLock) on every locker client of this key", ErrCuratorLayout, parent, c.name))
		}
	}
	return nil
}

// unsupported is Capabilities' Unsupported: in a Curator layout, the
// requests it cannot express fail with ErrCuratorLayout. The values are
// fixed, so that Capabilities compare equal.
func (l Layout) unsupported() error {
	switch l {
	case LayoutCuratorMutex:
		return errCuratorMutex
	case LayoutCuratorReadWrite:
		return errCuratorReadWrite
	}
	return nil
}

var (
	errCuratorMutex     = fmt.Errorf("%w (%v): Curator's InterProcessMutex has neither shared nor counted holds: %w", ErrCuratorLayout, LayoutCuratorMutex, errors.ErrUnsupported)
	errCuratorReadWrite = fmt.Errorf("%w (%v): counted holds (semaphores) do not interoperate with Curator's InterProcessSemaphoreV2: %w", ErrCuratorLayout, LayoutCuratorReadWrite, errors.ErrUnsupported)
)

// Curator's markers: the text before the sequence number by which its
// recipes find and order their nodes.
const (
	markMutex = "-lock-"
	markWrite = "-__WRIT__"
	markRead  = "-__READ__"
)

// checkLayout rejects a request that the driver's layout cannot express.
func (d *Driver) checkLayout(req driver.Request) error {
	switch {
	case d.layout == LayoutLocker:
		return nil
	case req.Limit > 0, req.Mode == driver.Shared && d.layout == LayoutCuratorMutex:
		return d.layout.unsupported()
	}
	return nil
}

// curatorInfix returns what follows the owner in the name of a node in
// mode m in a Curator layout.
func (l Layout) curatorInfix(m driver.Mode) string {
	switch {
	case m == driver.Shared:
		return markRead
	case l == LayoutCuratorReadWrite:
		return markWrite
	}
	return markMutex
}

// nodeMarks are the texts before the sequence number by which the lock
// recipes of every layout find and order their nodes: LayoutLocker's,
// then Curator's.
var nodeMarks = [...]struct {
	mark string
	mode driver.Mode
}{{"-w-", driver.Exclusive}, {"-r-", driver.Shared}, {markMutex, driver.Exclusive}, {markWrite, driver.Exclusive}, {markRead, driver.Shared}}

// parseNode parses the name of a child of a key's node, whatever wrote
// it: "_c_<id>", the last of a marker of nodeMarks in the name and the
// sequence number. It is this driver's node when id is a valid owner, or
// for "-r-" a counted node's "<owner>.<limit>.<weight>"; a Curator node of
// another id (Curator's UUIDs have dashes) is foreign. Any other name is a
// foreign exclusive node, ordered by the sequence number at its end or
// before all others: never dropped, as another client's recipe may
// consider it a hold.
func parseNode(name string) child {
	for k, m := range nodeMarks {
		i := strings.LastIndex(name, m.mark)
		if i < 0 {
			continue
		}
		seq, ok := parseSeq(name[i+len(m.mark):])
		if !ok {
			continue
		}
		id, prot := strings.CutPrefix(name[:i], protectedPrefix)
		c := child{name: name, owner: id, mode: m.mode, seq: seq}
		if k == 1 && strings.IndexByte(id, '.') >= 0 {
			ok = prot && parseCounted(&c, id)
		} else {
			ok = prot && checkOwner(id) == nil
		}
		if ok || k >= 2 {
			c.foreign, c.curator = !ok, !ok
			return c
		}
		break
	}
	c := child{name: name, mode: driver.Exclusive, seq: -1, foreign: true}
	if len(name) >= 10 {
		if seq, ok := parseSeq(name[len(name)-10:]); ok {
			c.seq = seq
		}
	}
	return c
}

// parseSeq parses a sequence number as ZooKeeper writes it: ten digits,
// or a sign and ten digits once the 32-bit counter wrapped.
func parseSeq(s string) (int64, bool) {
	if len(s) != 10 && (len(s) != 11 || s[0] != '-') {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 32)
	return n, err == nil && s[0] != '+'
}

// leaseTTL returns the lease length in the data of the node named name,
// or false for a foreign node, held for as long as its session lives.
func leaseTTL(name string, data []byte) (time.Duration, bool) {
	if name = name[strings.LastIndexByte(name, '/')+1:]; parseNode(name).foreign {
		return 0, false
	}
	return decodeTTL(data)
}
