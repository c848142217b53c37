package zkdriver

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
	"github.com/go-zookeeper/zk"
)

// queue is a parsed, ordered list of a lock's nodes.
type queue []child

func parseQueue(names []string) queue {
	q := make(queue, 0, len(names))
	for _, name := range names {
		q = append(q, parseNode(name)) // unknown names block: never dropped
	}
	sort.Slice(q, func(i, j int) bool {
		return q[i].seq < q[j].seq || q[i].seq == q[j].seq && q[i].name < q[j].name
	})
	return q
}

// index returns the position of the node named name, or -1.
func (q queue) index(name string) int {
	for i, c := range q {
		if c.name == name {
			return i
		}
	}
	return -1
}

// blockers returns the nodes among q[:end] that a node in mode must wait
// for: all of them for Exclusive, the exclusive ones for Shared.
func (q queue) blockers(end int, m driver.Mode) []child {
	var b []child
	for _, c := range q[:end] {
		if m == driver.Exclusive || c.mode == driver.Exclusive {
			b = append(b, c)
		}
	}
	return b
}

// judge returns whether q grants the node at index i (len(q): a request
// not queued yet) in mode m, with a counted node's limit and weight (else
// 0), by driverkit.Admit; lerr names a shared node before it with another
// limit: the node must be refused.
func (q queue) judge(i int, m driver.Mode, limit, weight int64) (granted bool, lerr *driver.LimitError) {
	return driverkit.Admit(driverkit.Claim{Mode: m, Limit: limit, Weight: weight}, func(yield func(driverkit.Claim) bool) {
		for _, c := range q[:i] {
			if !yield(driverkit.Claim{Mode: c.mode, Limit: c.limit, Weight: c.weight}) {
				return
			}
		}
	})
}

// held returns how many nodes at the head of q are granted.
func (q queue) held() int {
	for j, c := range q {
		if ok, _ := q.judge(j, c.mode, c.limit, c.weight); !ok {
			return j
		}
	}
	return len(q)
}

// inWay reports whether q[0] is among the nodes that keep the node at
// index i > 0 (in mode m, with limit) from being granted.
func (q queue) inWay(i int, m driver.Mode, limit int64) bool {
	return i > 0 && (m == driver.Exclusive || limit > 0 || q[0].mode == driver.Exclusive)
}

// lease returns the lease of n.
func (n *node) lease(ttl time.Duration) driver.Lease {
	return driver.Lease{Key: n.key, Owner: n.owner, Mode: n.mode, Token: uint64(n.czxid), TTL: ttl}
}

// createResult is what a lock node's create returns.
type createResult struct {
	path        string
	czxid       int64
	numChildren int32
	session     int64
	sent        time.Time
}

// create creates req's lock node with one multi: the create and a write
// of the key's node, whose stat carries the zxid (the node's czxid, the
// token) and the queue's length. It registers the node, as unknown (no
// path) when a failed create may have been applied.
func (d *Driver) create(ctx context.Context, op string, req driver.Request, parent, prefix string) (*node, createResult, error) {
	nk := nodeKey{req.Key, req.Owner}
	n := &node{key: req.Key, owner: req.Owner, mode: req.Mode, parent: parent, ttl: req.TTL, limit: req.Limit, weight: req.Weight, value: req.Value}
	// The multi's requests live in the node: one allocation for all.
	n.ops.create = zk.CreateRequest{Path: prefix, Data: appendData(n.ops.data[:0], req.TTL, req.Value), Acl: d.acl, Flags: zk.FlagEphemeral | zk.FlagSequence}
	n.ops.setParent = zk.SetDataRequest{Path: parent, Version: -1}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, createResult{}, driver.Permanent(errorf(op, req.Key, ErrClosed))
	}
	d.nodes[nk] = n
	_, known := d.parents.Get(parent)
	d.mu.Unlock()
	r, mayExist, err := d.sendCreate(ctx, n, known)
	if err != nil {
		d.mu.Lock()
		if !mayExist && d.nodes[nk] == n {
			delete(d.nodes, nk)
		}
		d.mu.Unlock()
		return nil, createResult{}, callFailed(ctx, op, req.Key, err)
	}
	d.mu.Lock()
	n.path, n.czxid, n.session, n.written = r.path, r.czxid, r.session, r.sent
	if r.session == 0 {
		n.path = "" // the session changed meanwhile: find the node by its name
	}
	d.parents.Put(parent, struct{}{})
	d.mu.Unlock()
	if r.session == 0 {
		return nil, createResult{}, errorf(op, req.Key, errSessionEnded)
	}
	st := d.state(r.session)
	if st != nil {
		d.follow(st)
	}
	if err := checkTTL(req.TTL, d.timeout(st)); err != nil {
		d.dropNode(ctx, n)
		return nil, createResult{}, errorf(op, req.Key, err)
	}
	return n, r, nil
}

// sendCreate sends n's create multi, making the key's node first when it
// is not known to exist, and again when the
// multi finds it missing. mayExist: a multi of unknown outcome was sent.
func (d *Driver) sendCreate(ctx context.Context, n *node, known bool) (r createResult, mayExist bool, err error) {
	for attempt := 0; ; attempt++ {
		if !known && attempt == 0 {
			if err = d.ensureParent(ctx, n.parent); err != nil {
				return r, mayExist, err
			}
		}
		if ctx.Done() == nil {
			r, err = d.createNode(&n.ops)
		} else {
			r, err = driverkit.Call(ctx, func() (createResult, error) { return d.createNode(&n.ops) }, d.undoCreate)
		}
		mayExist = err != nil && mayHaveApplied(err, ctx)
		if !errors.Is(err, zk.ErrNoNode) || attempt >= 3 {
			return r, mayExist, err
		}
		// The key's node is missing; the multi created nothing.
		d.mu.Lock()
		d.parents.Delete(n.parent)
		d.mu.Unlock()
		if err = d.ensureParent(ctx, n.parent); err != nil {
			return r, mayExist, err
		}
	}
}

// createOps are the requests of a lock node's create multi.
type createOps struct {
	create    zk.CreateRequest
	setParent zk.SetDataRequest
	data      [24]byte // create.Data's storage, when it fits
}

// lockPaths returns the path of req's key node and of req's node without
// its sequence number.
func (d *Driver) lockPaths(req driver.Request) (parent, prefix string) {
	if d.layout != LayoutLocker {
		return d.paths(req.Key, protectedPrefix, req.Owner, d.layout.curatorInfix(req.Mode))
	}
	if req.Limit > 0 {
		return d.paths(req.Key, nodePrefix(req.Owner, req.Mode, req.Limit, req.Weight))
	}
	return d.paths(req.Key, protectedPrefix, req.Owner, modeInfix(req.Mode))
}

// createNode sends the create multi. It runs without a context.
func (d *Driver) createNode(ops *createOps) (createResult, error) {
	before := d.conn.SessionID()
	sent := time.Now()
	res, err := d.conn.Multi(&ops.create, &ops.setParent)
	after := d.conn.SessionID()
	if err != nil {
		return createResult{}, err
	}
	if len(res) != 2 || res[0].String == "" || res[1].Stat == nil {
		return createResult{}, fmt.Errorf("zkdriver: unexpected multi response %+v", res)
	}
	r := createResult{
		path:        res[0].String,
		czxid:       res[1].Stat.Mzxid, // the multi's zxid: the node's czxid
		numChildren: res[1].Stat.NumChildren,
		sent:        sent,
	}
	if before == after || before == 0 {
		r.session = after
	}
	return r, nil
}

// undoCreate deletes a node whose create was abandoned by its caller.
func (d *Driver) undoCreate(r createResult, err error) {
	if err == nil && r.path != "" {
		_ = d.conn.Delete(r.path, -1)
	}
}

// mayHaveApplied reports whether a failed call may have been applied.
func mayHaveApplied(err error, ctx context.Context) bool {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return true // abandoned; undoCreate deletes what it made
	}
	return !isAny(err, zk.ErrNoNode, zk.ErrNodeExists, zk.ErrNoAuth, zk.ErrInvalidACL, zk.ErrBadArguments,
		zk.ErrInvalidPath, zk.ErrNoChildrenForEphemerals, zk.ErrBadVersion, zk.ErrNotEmpty, zk.ErrInvalidFlags, zk.ErrAPIError)
}

// ensureParent creates the key's node (a container, ZooKeeper 3.5.3 and
// later) and, if needed, the root and its ancestors.
func (d *Driver) ensureParent(ctx context.Context, parent string) error {
	create := func() error {
		_, err := d.conn.CreateContainer(parent, nil, zk.FlagContainer, d.acl)
		if errors.Is(err, zk.ErrNodeExists) {
			return nil
		}
		return err
	}
	_, err := driverkit.Call(ctx, func() (struct{}, error) {
		err := create()
		if errors.Is(err, zk.ErrNoNode) {
			if err = d.ensureRoot(); err == nil {
				err = create()
			}
		}
		return struct{}{}, err
	}, nil)
	return err
}

// ensureRoot creates the root and its missing ancestors.
func (d *Driver) ensureRoot() error {
	if d.root == "/" {
		return nil
	}
	p := ""
	for _, seg := range strings.Split(d.root[1:], "/") {
		p += "/" + seg
		_, err := d.conn.Create(p, nil, zk.FlagPersistent, d.acl)
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}

// grant marks n granted and returns its lease. For Acquire (start), a node
// written within the last half of its TTL gets Lease.Start, the send time
// of that write, so that the front-end needs no confirming Refresh.
func (d *Driver) grant(n *node, start bool) driver.Lease {
	d.mu.Lock()
	n.granted = true
	l := n.lease(n.ttl)
	if start && time.Since(n.written) <= n.ttl/2 {
		l.Start = n.written
	}
	d.mu.Unlock()
	return l
}

// errNodeGone means the driver's own node disappeared.
var errNodeGone = errors.New("zkdriver: the lock node disappeared")

// dropNode deletes n's node and forgets n; it returns an error when the
// node may still exist. If ctx is done, it deletes the node in the
// background and returns ctx's error.
func (d *Driver) dropNode(ctx context.Context, n *node) error {
	d.mu.Lock()
	path := n.path
	d.mu.Unlock()
	if path == "" {
		return nil
	}
	if err := ctx.Err(); err != nil {
		if d.closedErr() == nil {
			go func() {
				if err := d.conn.Delete(path, -1); err == nil || errors.Is(err, zk.ErrNoNode) {
					d.forget(n)
				}
			}()
		}
		return err
	}
	if err := d.del(ctx, path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	d.forget(n)
	return nil
}

// forget removes n from the driver's nodes.
func (d *Driver) forget(n *node) {
	d.mu.Lock()
	nk := nodeKey{n.key, n.owner}
	if d.nodes[nk] == n {
		delete(d.nodes, nk)
	}
	d.mu.Unlock()
}

// rewrite writes n's node again with its lease, ttl, and value, which
// renews the lease for those watching it, and records the write. It
// returns errNodeGone, forgetting n, when the node is gone, not of the
// current session, or not n's (another czxid).
func (d *Driver) rewrite(ctx context.Context, n *node, ttl time.Duration) error {
	d.mu.Lock()
	path, czxid := n.path, n.czxid
	d.mu.Unlock()
	sent := time.Now()
	data := encodeData(ttl, n.value)
	st, err := d.set(ctx, path, data, -1)
	switch {
	case errors.Is(err, zk.ErrNoNode), err == nil && (st.EphemeralOwner == 0 || st.EphemeralOwner != d.conn.SessionID() || czxid != 0 && st.Czxid != czxid):
		d.forget(n)
		return errNodeGone
	case err != nil:
		return err
	}
	d.mu.Lock()
	n.czxid, n.session, n.written, n.ttl = st.Czxid, st.EphemeralOwner, sent, ttl
	d.mu.Unlock()
	if s := d.state(st.EphemeralOwner); s != nil {
		d.follow(s) // a node found again (findLost) may be of a session not followed yet
	}
	return nil
}

// list lists and parses the queue under parent.
func (d *Driver) list(ctx context.Context, parent string) (queue, error) {
	names, err := d.children(ctx, parent)
	if err != nil {
		return nil, err
	}
	return parseQueue(names), nil
}
