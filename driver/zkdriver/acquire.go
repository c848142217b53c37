package zkdriver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-zookeeper/zk"
)

// Acquire implements driver.Acquirer: it creates the owner's lock node at
// the end of the key's queue and waits until nothing before it blocks it,
// watching only the node it waits for (Curator's recipe, no herd): an
// exclusive node waits for the node just before it, a shared one for the
// closest exclusive node before it. When that node is deleted and it was
// the only one blocking, the wait ends without another round trip.
//
// While it waits Acquire rewrites its own node every third of the TTL, so
// that the node behind it does not take it for dead, and it deletes the
// node it waits for if that node's lease expires (no rewrite for its TTL,
// by this client's clock). It fails when its own session ends, when its
// node disappears, and when ctx is done; then it deletes its node (in the
// background if ctx is done, so that it returns by ctx's deadline) and
// leaves nothing queued.
func (d *Driver) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	l, err := d.acquire(ctx, req)
	if err != nil {
		return driver.Lease{}, d.final(ctx, "acquire", req.Key, err)
	}
	return l, nil
}

func (d *Driver) acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	const op = "acquire"
	if err := d.begin(ctx, op, req.Key); err != nil {
		return driver.Lease{}, err
	}
	if err := d.checkRequest(op, req); err != nil {
		return driver.Lease{}, err
	}
	parent := d.parentPath(req.Key)
	nk := nodeKey{req.Key, req.Owner}
	var n *node
	d.mu.Lock()
	prev := d.nodes[nk]
	d.mu.Unlock()
	if prev != nil {
		l, done, err := d.resume(ctx, op, prev, req, true)
		if done {
			return l, err
		}
		d.mu.Lock()
		if d.nodes[nk] == prev && prev.path != "" {
			n = prev // the owner's place in the queue, found again
		}
		d.mu.Unlock()
	}
	var q queue
	var gone int
	if n == nil {
		var r createResult
		var err error
		n, r, err = d.create(ctx, op, req, parent)
		if err != nil {
			return driver.Lease{}, err
		}
		if r.numChildren == 1 {
			return d.grant(n, true), nil
		}
		q, gone = d.takeSnapshot(nk, n, r)
	}
	d.markHot(req.Key)
	l, err := d.wait(ctx, n, req, q, gone)
	if err != nil {
		_ = d.dropNode(ctx, n)
		if ctx.Err() != nil {
			return driver.Lease{}, errorf(op, req.Key, ctx.Err())
		}
		return driver.Lease{}, fail(op, req.Key, err)
	}
	return l, nil
}

// wait waits until n is granted; see Acquire.
//
// It watches the node it waits for (pred) and, when more than one node
// blocks it, also the blocking node before that one (pprev): when pprev
// goes, it lists the queue again, so that by the time pred goes it knows
// whether pred was the last node in its way and can take the lock at once,
// without listing the queue on the handoff path. Each node therefore has
// at most two watchers among the exclusive waiters (readers behind a
// writer all watch it, as in Curator's read-write lock).
//
// known, if not nil, is the queue as it is now but for gone nodes, not
// known which, that were deleted from before n (see takeSnapshot).
func (d *Driver) wait(ctx context.Context, n *node, req driver.Request, known queue, gone int) (driver.Lease, error) {
	d.mu.Lock()
	parent, path, ttl, written, session := n.parent, n.path, n.ttl, n.written, n.session
	d.mu.Unlock()
	st := d.sess.state(session)
	if st == nil || st.over() {
		return driver.Lease{}, errSessionEnded
	}
	name := path[len(parent)+1:]

	keepAlive := time.NewTimer(max(time.Until(written.Add(ttl/3)), 0))
	defer keepAlive.Stop()
	expiry := time.NewTimer(time.Hour)
	expiry.Stop()
	defer expiry.Stop()
	retry := &retrier{}
	var failingSince time.Time

	// pause waits after a transient error; it returns an error when the
	// wait must end.
	pause := func(cause error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if st.over() {
			return fmt.Errorf("%w: %w", errSessionEnded, st.err)
		}
		if isPermanent(cause) || errors.Is(cause, zk.ErrClosing) {
			return cause
		}
		if err := d.closedErr(); err != nil {
			return err
		}
		if failingSince.IsZero() {
			failingSince = time.Now()
		} else if time.Since(failingSince) > st.timeout {
			// Nothing got through for a whole session timeout: the
			// session, and our node with it, cannot be alive.
			return fmt.Errorf("zkdriver: no answer from ZooKeeper for longer than the session timeout %v: %w", st.timeout, cause)
		}
		t := time.NewTimer(retry.next())
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-st.expired:
			return fmt.Errorf("%w: %w", errSessionEnded, st.err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	ok := func() {
		retry.reset()
		failingSince = time.Time{}
	}
	// keep rewrites n's node; it returns an error when the node is gone.
	keep := func() error {
		sent := time.Now()
		st, err := d.write(ctx, path, ttl)
		switch {
		case err == nil:
			d.mu.Lock()
			n.written, n.mzxid = sent, st.Mzxid
			d.mu.Unlock()
			keepAlive.Reset(ttl / 3)
		case errors.Is(err, zk.ErrNoNode), errors.Is(err, errNotOurs):
			return errNodeGone
		case ctx.Err() != nil:
			return ctx.Err()
		default:
			keepAlive.Reset(min(ttl/10, time.Second))
		}
		return nil
	}
	getW := func(p string) (watchResult, error) {
		return call(ctx, func() (watchResult, error) {
			data, stat, ch, err := d.conn.GetW(p)
			return watchResult{data, stat, ch}, err
		}, nil)
	}

	var (
		list     = true // the queue must be listed
		pred     string // the node waited for
		only     bool   // pred is the last node in the way
		predCh   <-chan zk.Event
		predVer  int32
		seenZxid int64 // pred's version, first seen at seenAt
		seenAt   time.Time
		pprev    string // the blocking node before pred, if any
		pprevCh  <-chan zk.Event
		granted  = func() (driver.Lease, error) { return d.grant(n, true), nil }
		// sure is false while only counts on unknown deletions from a
		// snapshot not having taken pred: until pred is seen to exist.
		sure bool
	)
	for {
		if list {
			q, unknown := known, gone
			known, gone = nil, 0
			if q != nil && unknown > 0 {
				// Usable only if the gone nodes cannot matter: an
				// exclusive node waits for every node before it, so only
				// their number does, as long as pred and pprev are
				// there (which their reads check).
				if i := q.index(name); req.Mode != driver.Exclusive || i < 0 || unknown >= i {
					q = nil
				}
			}
			if q == nil {
				unknown = 0
				names, err := call(ctx, func() ([]string, error) {
					names, _, err := d.conn.Children(parent)
					return names, err
				}, nil)
				if err != nil {
					if errors.Is(err, zk.ErrNoNode) {
						return driver.Lease{}, errNodeGone
					}
					if err := pause(err); err != nil {
						return driver.Lease{}, err
					}
					continue
				}
				ok()
				q = parseQueue(names)
			}
			list = false
			i := q.index(name)
			if i < 0 {
				return driver.Lease{}, errNodeGone
			}
			if mine := q.ofOwner(req.Owner); len(mine) > 1 {
				// Another node of this owner: a create whose reply was
				// lost. It must not hold up this one.
				for _, c := range mine {
					if c.name != name {
						p := parent + "/" + c.name
						_, err := call(ctx, func() (struct{}, error) { return struct{}{}, d.conn.Delete(p, -1) }, nil)
						if err != nil && !errors.Is(err, zk.ErrNoNode) {
							if err := pause(err); err != nil {
								return driver.Lease{}, err
							}
						}
					}
				}
				list, known = true, nil
				continue
			}
			b := q.blockers(i, req.Mode)
			if len(b) == 0 {
				return granted()
			}
			if p := parent + "/" + b[len(b)-1].name; p != pred {
				pred, predCh, seenZxid = p, nil, 0
				expiry.Stop()
			}
			only = len(b)-unknown == 1
			sure = unknown == 0
			pp := ""
			if !only {
				pp = parent + "/" + b[len(b)-2].name
			}
			if pp != pprev {
				pprev, pprevCh = pp, nil
			}
		}
		if predCh == nil {
			got, err := getW(pred)
			recv := time.Now()
			if errors.Is(err, zk.ErrNoNode) {
				if only && sure {
					return granted()
				}
				list = true
				continue
			}
			if err != nil {
				if err := pause(err); err != nil {
					return driver.Lease{}, err
				}
				continue
			}
			ok()
			sure = true
			predCh, predVer = got.ch, got.st.Version
			if got.st.Mzxid != seenZxid {
				// A new version: its lease runs from now at the earliest.
				seenZxid, seenAt = got.st.Mzxid, recv
			}
			expiry.Stop()
			if predTTL, ok := decodeTTL(got.data); ok {
				expiry.Reset(max(time.Until(seenAt.Add(predTTL)), 0))
			}
		}
		if pprev != "" && pprevCh == nil {
			got, err := getW(pprev)
			if errors.Is(err, zk.ErrNoNode) {
				list = true
				continue
			}
			if err != nil {
				if err := pause(err); err != nil {
					return driver.Lease{}, err
				}
				continue
			}
			ok()
			pprevCh = got.ch
		}
		select {
		case ev := <-predCh:
			predCh = nil
			switch ev.Type {
			case zk.EventNodeDeleted:
				if only {
					return granted()
				}
				list = true
			case zk.EventNodeDataChanged:
				// Rewritten: read it again (and restart its lease).
			default:
				// The watch was dropped (session expired, or the
				// connection closed): look again.
				if st.over() {
					return driver.Lease{}, fmt.Errorf("%w: %w", errSessionEnded, st.err)
				}
				if err := pause(ev.Err); err != nil {
					return driver.Lease{}, err
				}
				list = true
			}
		case ev := <-pprevCh:
			pprevCh = nil
			if ev.Type != zk.EventNodeDataChanged {
				list = true // gone, or the watch dropped: look again
			}
		case <-expiry.C:
			// Not rewritten for its whole TTL since we saw this version:
			// its holder has declared it lost. The delete names the
			// version, so a refresh on its way wins.
			_, err := call(ctx, func() (struct{}, error) { return struct{}{}, d.conn.Delete(pred, predVer) }, nil)
			switch {
			case err == nil, errors.Is(err, zk.ErrNoNode):
				if only {
					return granted()
				}
				predCh, list = nil, true
			case errors.Is(err, zk.ErrBadVersion):
				predCh = nil // read it again
			default:
				if err := pause(err); err != nil {
					return driver.Lease{}, err
				}
				predCh = nil
			}
		case <-keepAlive.C:
			if err := keep(); err != nil {
				return driver.Lease{}, err
			}
		case <-st.expired:
			return driver.Lease{}, fmt.Errorf("%w: %w", errSessionEnded, st.err)
		case <-ctx.Done():
			return driver.Lease{}, ctx.Err()
		}
	}
}

// watchResult carries the results of a GetW through call.
type watchResult struct {
	data []byte
	st   *zk.Stat
	ch   <-chan zk.Event
}

// retrier spaces retries of transient errors: 10ms doubling to 1s.
type retrier struct{ d time.Duration }

func (r *retrier) next() time.Duration {
	if r.d == 0 {
		r.d = 10 * time.Millisecond
	} else {
		r.d = min(2*r.d, time.Second)
	}
	return r.d
}

func (r *retrier) reset() { r.d = 0 }
