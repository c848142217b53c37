package zkdriver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-zookeeper/zk"
)

// begin checks what every call checks before any I/O.
func (d *Driver) begin(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return errorf(op, key, err)
	}
	if err := d.closedErr(); err != nil {
		return driver.Permanent(errorf(op, key, err))
	}
	return nil
}

// checkRequest validates req before any I/O.
func (d *Driver) checkRequest(op string, req driver.Request) error {
	if err := checkOwner(req.Owner); err != nil {
		return driver.Permanent(errorf(op, req.Key, err))
	}
	if req.Mode != driver.Exclusive && req.Mode != driver.Shared {
		return driver.Permanent(errorf(op, req.Key, fmt.Errorf("unknown mode %v", req.Mode)))
	}
	if err := checkTTL(req.TTL, d.sess.Timeout()); err != nil {
		return errorf(op, req.Key, err)
	}
	return nil
}

// lease returns the lease of n.
func (n *node) lease(ttl time.Duration) driver.Lease {
	return driver.Lease{Key: n.key, Owner: n.owner, Mode: n.mode, Token: uint64(n.czxid), TTL: ttl}
}

// TryAcquire implements driver.Driver. It creates the owner's lock node
// (one round trip when the key is free) and keeps it if the node is first
// in the key's queue (Exclusive) or has no exclusive node before it
// (Shared); otherwise it deletes it again and returns a *driver.LockedError.
// While a key is contended it lists the queue first and creates no node
// when the key is taken. A second TryAcquire by the holder refreshes the
// lease and returns the same token; a TryAcquire after one whose reply was
// lost finds the owner's node by its name.
func (d *Driver) TryAcquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	l, err := d.tryAcquire(ctx, req)
	if err != nil {
		return driver.Lease{}, d.final(ctx, "acquire", req.Key, err)
	}
	return l, nil
}

func (d *Driver) tryAcquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	const op = "acquire"
	if err := d.begin(ctx, op, req.Key); err != nil {
		return driver.Lease{}, err
	}
	if err := d.checkRequest(op, req); err != nil {
		return driver.Lease{}, err
	}
	parent := d.parentPath(req.Key)
	d.mu.Lock()
	n := d.nodes[nodeKey{req.Key, req.Owner}]
	d.mu.Unlock()
	if n != nil {
		l, done, err := d.resume(ctx, op, n, req, false)
		if done {
			return l, err
		}
	}
	if d.isHot(req.Key) {
		if err := d.peek(ctx, op, req, parent); err != nil {
			return driver.Lease{}, err
		}
	}
	n, r, err := d.create(ctx, op, req, parent)
	if err != nil {
		return driver.Lease{}, err
	}
	if r.numChildren == 1 {
		return d.grant(n, false), nil
	}
	return d.settle(ctx, op, n, req)
}

// peek lists key's queue and returns a *driver.LockedError if req would
// have to wait, after checking whether the first node's lease expired.
// It returns nil when req may try to create its node.
func (d *Driver) peek(ctx context.Context, op string, req driver.Request, parent string) error {
	got, err := call(ctx, func() (listResult, error) {
		names, st, err := d.conn.Children(parent)
		return listResult{names, st}, err
	}, nil)
	if err != nil {
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if ctx.Err() != nil {
			return errorf(op, req.Key, ctx.Err())
		}
		return nil // the create path reports it, if it persists
	}
	q := parseQueue(got.names)
	d.snapshot(nodeKey{req.Key, req.Owner}, q, got.st.Cversion, 0)
	b := q.blockers(len(q), req.Mode)
	if len(b) == 0 {
		return nil
	}
	if len(q.ofOwner(req.Owner)) > 0 {
		return nil // ours: reconciled by the create path
	}
	first := q[0]
	if first.name != b[0].name {
		// A shared first node; the exclusive one behind it waits.
		d.markHot(req.Key)
		return &driver.LockedError{}
	}
	gone, remaining, err := d.reclaim(ctx, parent, first)
	if err != nil {
		if ctx.Err() != nil {
			return errorf(op, req.Key, ctx.Err())
		}
		return nil
	}
	if gone && len(b) == 1 {
		return nil
	}
	d.markHot(req.Key)
	return &driver.LockedError{Remaining: remaining}
}

// createResult is what a lock node's create returns.
type createResult struct {
	path        string
	czxid       int64
	numChildren int32
	cversion    int32 // the key node's after the create
	session     int64
	sent        time.Time
}

// create creates req's lock node: one multi with the create and a write
// of the key's node, whose returned stat carries the transaction's zxid
// (the new node's czxid, the fencing token) and the number of nodes in the
// queue. It registers the node; on error the node is registered as
// unknown when the create may have been applied.
func (d *Driver) create(ctx context.Context, op string, req driver.Request, parent string) (*node, createResult, error) {
	nk := nodeKey{req.Key, req.Owner}
	n := &node{key: req.Key, owner: req.Owner, mode: req.Mode, parent: parent, ttl: req.TTL}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, createResult{}, driver.Permanent(errorf(op, req.Key, ErrClosed))
	}
	d.nodes[nk] = n
	d.mu.Unlock()
	prefix := parent + "/" + protectedPrefix + req.Owner + modeInfix(req.Mode)
	data := encodeTTL(req.TTL)
	var r createResult
	var err error
	for attempt := 0; ; attempt++ {
		r, err = call(ctx, func() (createResult, error) {
			return d.createNode(parent, prefix, data)
		}, d.undoCreate)
		if errors.Is(err, zk.ErrNoNode) && attempt < 3 {
			// The key's node (or the root) is missing: make it. Our
			// node was not created (a multi is all or nothing).
			if err = d.ensureParent(ctx, parent); err == nil {
				continue
			}
		}
		break
	}
	if err != nil {
		d.mu.Lock()
		if applied := mayHaveApplied(err, ctx); !applied {
			if d.nodes[nk] == n {
				delete(d.nodes, nk)
			}
		}
		d.mu.Unlock()
		if ctx.Err() != nil {
			return nil, createResult{}, errorf(op, req.Key, ctx.Err())
		}
		return nil, createResult{}, fail(op, req.Key, err)
	}
	d.mu.Lock()
	n.path, n.czxid, n.mzxid, n.session, n.written = r.path, r.czxid, r.czxid, r.session, r.sent
	d.mu.Unlock()
	if r.session == 0 {
		// The session changed while the create was on its way: the
		// node may live in the old session (then it is gone) or the new
		// one. Leave it to be found by its name.
		d.mu.Lock()
		n.path = ""
		d.mu.Unlock()
		return nil, createResult{}, errorf(op, req.Key, errSessionEnded)
	}
	if err := checkTTL(req.TTL, d.sessionTimeout(r.session)); err != nil {
		d.dropNode(ctx, n)
		return nil, createResult{}, errorf(op, req.Key, err)
	}
	return n, r, nil
}

// createNode sends the create multi. It runs without a context.
func (d *Driver) createNode(parent, prefix string, data []byte) (createResult, error) {
	before := d.conn.SessionID()
	sent := time.Now()
	res, err := d.conn.Multi(
		&zk.CreateRequest{Path: prefix, Data: data, Acl: d.acl, Flags: zk.FlagEphemeral | zk.FlagSequence},
		&zk.SetDataRequest{Path: parent, Data: nil, Version: -1},
	)
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
		cversion:    res[1].Stat.Cversion,
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

// mayHaveApplied reports whether a failed call may have been applied on
// the server: its reply was lost, or ctx gave up waiting for it.
func mayHaveApplied(err error, ctx context.Context) bool {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return true // abandoned; undoCreate deletes what it made
	}
	var code bool
	for _, e := range []error{zk.ErrNoNode, zk.ErrNodeExists, zk.ErrNoAuth, zk.ErrInvalidACL, zk.ErrBadArguments,
		zk.ErrInvalidPath, zk.ErrNoChildrenForEphemerals, zk.ErrBadVersion, zk.ErrNotEmpty, zk.ErrInvalidFlags, zk.ErrAPIError} {
		if errors.Is(err, e) {
			code = true
		}
	}
	return !code
}

// ensureParent creates the key's node (a container, which ZooKeeper
// deletes once it is empty again) and, if needed, the root and its
// ancestors (persistent).
func (d *Driver) ensureParent(ctx context.Context, parent string) error {
	create := func() error {
		d.mu.Lock()
		persistent := d.persistent
		d.mu.Unlock()
		var err error
		if persistent {
			_, err = d.conn.Create(parent, nil, zk.FlagPersistent, d.acl)
		} else {
			_, err = d.conn.CreateContainer(parent, nil, zk.FlagContainer, d.acl)
			if err != nil && strings.Contains(err.Error(), "unknown error: -6") { // Unimplemented: ZooKeeper < 3.5.3
				d.mu.Lock()
				d.persistent = true
				d.mu.Unlock()
				_, err = d.conn.Create(parent, nil, zk.FlagPersistent, d.acl)
			}
		}
		if errors.Is(err, zk.ErrNodeExists) {
			return nil
		}
		return err
	}
	_, err := call(ctx, func() (struct{}, error) {
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

// sessionTimeout returns the negotiated timeout of session id, or 0 when
// it is unknown.
func (d *Driver) sessionTimeout(id int64) time.Duration {
	if st := d.sess.state(id); st != nil {
		return st.timeout
	}
	return 0
}

// grant marks n granted and returns its lease.
func (d *Driver) grant(n *node, fresh bool) driver.Lease {
	d.mu.Lock()
	n.granted, n.fresh = true, fresh
	l := n.lease(n.ttl)
	d.mu.Unlock()
	return l
}

// settle lists the queue after n was created behind other nodes: n is
// granted if nothing before it blocks it (or what blocked it had expired);
// otherwise n is deleted and a *driver.LockedError returned.
func (d *Driver) settle(ctx context.Context, op string, n *node, req driver.Request) (driver.Lease, error) {
	got, err := call(ctx, func() (listResult, error) {
		names, st, err := d.conn.Children(n.parent)
		return listResult{names, st}, err
	}, nil)
	if err != nil {
		d.dropNode(ctx, n)
		if ctx.Err() != nil {
			return driver.Lease{}, errorf(op, req.Key, ctx.Err())
		}
		return driver.Lease{}, fail(op, req.Key, err)
	}
	q := parseQueue(got.names)
	name := n.path[len(n.parent)+1:]
	i := q.index(name)
	if i < 0 {
		d.forget(n)
		return driver.Lease{}, errorf(op, req.Key, errNodeGone)
	}
	// Older nodes of the same owner (a create whose reply was lost):
	// the oldest one is the owner's place.
	if mine := q.ofOwner(req.Owner); len(mine) > 1 {
		return d.adoptOldest(ctx, op, n, req, q, mine)
	}
	b := q.blockers(i, req.Mode)
	var remaining time.Duration
	if len(b) > 0 && q[0].name == b[0].name {
		gone, rem, err := d.reclaim(ctx, n.parent, q[0])
		if err == nil && gone {
			b = b[1:]
		}
		remaining = rem
	}
	if len(b) == 0 {
		return d.grant(n, false), nil
	}
	d.markHot(req.Key)
	if err := d.dropNode(ctx, n); err != nil {
		// The node may still be there: report the failure, so that the
		// front-end cleans up (Release) rather than leave a node
		// blocking the queue.
		return driver.Lease{}, fail(op, req.Key, err)
	}
	d.snapshot(nodeKey{req.Key, req.Owner}, append(q[:i:i], q[i+1:]...), got.st.Cversion, 1)
	return driver.Lease{}, &driver.LockedError{Remaining: remaining}
}

// errNodeGone means the driver's own node disappeared: its session ended
// or another client deleted it (its lease had expired).
var errNodeGone = errors.New("zkdriver: the lock node disappeared")

// adoptOldest handles several nodes of one owner in a queue: the result of
// a create whose reply was lost and a retry. It deletes all but the oldest
// and continues with that one as n.
func (d *Driver) adoptOldest(ctx context.Context, op string, n *node, req driver.Request, q queue, mine []child) (driver.Lease, error) {
	oldest := mine[0]
	for _, c := range mine[1:] {
		p := n.parent + "/" + c.name
		if _, err := call(ctx, func() (struct{}, error) { return struct{}{}, d.conn.Delete(p, -1) }, nil); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return driver.Lease{}, fail(op, req.Key, err)
		}
	}
	d.mu.Lock()
	n.path = n.parent + "/" + oldest.name
	n.czxid = 0
	d.mu.Unlock()
	l, _, err := d.resume(ctx, op, n, req, false)
	return l, err
}

// dropNode deletes n's node and forgets n. It returns an error when the
// node may still exist. If ctx is done, the node is deleted in the
// background (go-zookeeper bounds the request by the connection's life:
// it is answered, or failed when the connection breaks or is closed), so
// that the caller returns by ctx's deadline even when ZooKeeper does not
// answer; dropNode then returns ctx's error.
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
	_, err := call(ctx, func() (struct{}, error) { return struct{}{}, d.conn.Delete(path, -1) }, nil)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
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

// resume continues with a node this driver already has for req's owner:
// a hold (re-acquire: refresh it, same token), a create whose outcome is
// not known (find the node by its name), or a leftover queue place. It
// reports done=false when the caller should create a new node.
func (d *Driver) resume(ctx context.Context, op string, n *node, req driver.Request, wait bool) (driver.Lease, bool, error) {
	d.mu.Lock()
	path, granted, lost, mode, session := n.path, n.granted, n.lost, n.mode, n.session
	expired := granted && time.Since(n.written) >= n.ttl
	d.mu.Unlock()
	if lost != nil || (path != "" && session != d.conn.SessionID()) {
		// Its session is over: so is the node. A new node, with a new
		// token, is a new grant.
		d.forget(n)
		return driver.Lease{}, false, nil
	}
	if mode != req.Mode {
		return driver.Lease{}, true, driver.Permanent(errorf(op, req.Key, fmt.Errorf("owner %.8s… already has a %v node", req.Owner, mode)))
	}
	if path == "" {
		// Find the node of the lost reply.
		names, err := call(ctx, func() ([]string, error) {
			names, _, err := d.conn.Children(n.parent)
			return names, err
		}, nil)
		if errors.Is(err, zk.ErrNoNode) {
			d.forget(n)
			return driver.Lease{}, false, nil
		}
		if err != nil {
			return driver.Lease{}, true, fail(op, req.Key, err)
		}
		mine := parseQueue(names).ofOwner(req.Owner)
		if len(mine) == 0 {
			d.forget(n)
			return driver.Lease{}, false, nil
		}
		for _, c := range mine[1:] {
			p := n.parent + "/" + c.name
			_, _ = call(ctx, func() (struct{}, error) { return struct{}{}, d.conn.Delete(p, -1) }, nil)
		}
		path = n.parent + "/" + mine[0].name
		d.mu.Lock()
		n.path = path
		d.mu.Unlock()
	}
	if expired {
		// The lease ran out by our own clock: others may already
		// consider the node dead. Start over with a new node.
		_ = d.dropNode(ctx, n)
		return driver.Lease{}, false, nil
	}
	// Refresh the node: this proves it exists in our session and gives
	// its czxid.
	sent := time.Now()
	st, err := d.write(ctx, path, req.TTL)
	if errors.Is(err, zk.ErrNoNode) || errors.Is(err, errNotOurs) {
		d.forget(n)
		return driver.Lease{}, false, nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return driver.Lease{}, true, errorf(op, req.Key, ctx.Err())
		}
		return driver.Lease{}, true, fail(op, req.Key, err)
	}
	d.mu.Lock()
	n.czxid, n.mzxid, n.session, n.written, n.ttl = st.Czxid, st.Mzxid, st.EphemeralOwner, sent, req.TTL
	d.mu.Unlock()
	if granted {
		return d.grant(n, false), true, nil
	}
	if wait {
		return driver.Lease{}, false, nil // the caller waits with n
	}
	// A queue place or a found node: granted only if first.
	l, err := d.settle(ctx, op, n, req)
	return l, true, err
}

// errNotOurs means a node found by its name belongs to another session.
var errNotOurs = errors.New("zkdriver: node of another session")

// write refreshes the node at path: its data is the lease length, and the
// returned stat its czxid. It fails with errNotOurs if the node does not
// belong to the connection's current session.
func (d *Driver) write(ctx context.Context, path string, ttl time.Duration) (*zk.Stat, error) {
	data := encodeTTL(ttl)
	st, err := call(ctx, func() (*zk.Stat, error) { return d.conn.Set(path, data, -1) }, nil)
	if err != nil {
		return nil, err
	}
	if st.EphemeralOwner == 0 || st.EphemeralOwner != d.conn.SessionID() {
		return nil, errNotOurs
	}
	return st, nil
}

// reclaim checks whether the lease of c, the first node of the queue under
// parent, has expired, and deletes c if it has: when the node's version
// has not changed for its whole TTL, measured on this client's clock from
// the moment the version was first seen. The owner of the node declares
// its hold lost by then (its deadline runs from the send time of the
// write that made the version, before this client saw it). A node that
// changes meanwhile (a refresh) is not deleted: the delete names the
// version. To spare round trips, a node is read only once its observation
// is due; a node first seen in a listing is only noted.
func (d *Driver) reclaim(ctx context.Context, parent string, c child) (gone bool, remaining time.Duration, err error) {
	path := parent + "/" + c.name
	now := time.Now()
	d.mu.Lock()
	o, ok := d.obs[parent]
	d.mu.Unlock()
	if !ok || o.path != path {
		d.observe(parent, observation{path: path, seen: now})
		return false, 0, nil
	}
	if o.mzxid != 0 && now.Sub(o.seen) < o.ttl {
		return false, o.ttl - now.Sub(o.seen), nil
	}
	if o.mzxid == 0 && now.Sub(o.seen) < pollGap {
		return false, 0, nil
	}
	got, err := call(ctx, func() (getResult, error) {
		data, st, err := d.conn.Get(path)
		return getResult{data, st}, err
	}, nil)
	recv := time.Now()
	data, st := got.data, got.st
	if errors.Is(err, zk.ErrNoNode) {
		d.unobserve(parent, path)
		return true, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	ttl, ok := decodeTTL(data)
	if !ok {
		return false, 0, nil // not ours to judge
	}
	if o.mzxid != st.Mzxid {
		d.observe(parent, observation{path: path, mzxid: st.Mzxid, seen: recv, ttl: ttl})
		return false, ttl, nil
	}
	// Unchanged for o.ttl since o.seen: expired.
	_, err = call(ctx, func() (struct{}, error) { return struct{}{}, d.conn.Delete(path, st.Version) }, nil)
	switch {
	case err == nil, errors.Is(err, zk.ErrNoNode):
		d.unobserve(parent, path)
		return true, 0, nil
	case errors.Is(err, zk.ErrBadVersion):
		d.observe(parent, observation{path: path, seen: time.Now()})
		return false, 0, nil
	}
	return false, 0, err
}

// pollGap is how soon after first noting a node in a listing TryAcquire
// reads it to start observing its lease.
const pollGap = 5 * time.Millisecond

func (d *Driver) observe(parent string, o observation) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.obs) >= 4096 {
		now := time.Now()
		for p, x := range d.obs {
			if now.Sub(x.seen) > max(x.ttl, time.Second)*2 {
				delete(d.obs, p)
			}
		}
		if len(d.obs) >= 4096 {
			clear(d.obs)
		}
	}
	d.obs[parent] = o
}

func (d *Driver) unobserve(parent, path string) {
	d.mu.Lock()
	if o, ok := d.obs[parent]; ok && o.path == path {
		delete(d.obs, parent)
	}
	d.mu.Unlock()
}

// listResult carries the results of a Children through call.
type listResult struct {
	names []string
	st    *zk.Stat
}

// A snapshot is a key's queue as TryAcquire last saw it for an owner that
// it refused, kept for the Acquire that usually follows: if nothing but
// the owner's own changes happened to the queue since, which the key
// node's cversion after the Acquire's create tells, Acquire need not list
// the queue again.
type snapshot struct {
	q        queue
	cversion int32 // the key node's cversion when q was listed
	own      int32 // changes to the queue made by the owner since
	at       time.Time
}

// snapshot records q for the owner's next Acquire.
func (d *Driver) snapshot(nk nodeKey, q queue, cversion, own int32) {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.snaps) >= 1024 {
		for k, s := range d.snaps {
			if now.Sub(s.at) > snapshotFor {
				delete(d.snaps, k)
			}
		}
		if len(d.snaps) >= 1024 {
			clear(d.snaps)
		}
	}
	d.snaps[nk] = snapshot{q: q, cversion: cversion, own: own, at: now}
}

// snapshotFor is how long a snapshot is kept.
const snapshotFor = time.Second

// takeSnapshot returns the queue after the owner's create r if the
// owner's snapshot is recent and the queue changed since in known ways
// only: the owner's own changes, and deletions of gone nodes that are not
// known (from the key node's cversion and number of children, the
// deletions and creates by others follow). It returns nil when others
// created nodes meanwhile, or the snapshot is missing or old.
func (d *Driver) takeSnapshot(nk nodeKey, n *node, r createResult) (q queue, gone int) {
	d.mu.Lock()
	s, ok := d.snaps[nk]
	delete(d.snaps, nk)
	d.mu.Unlock()
	if !ok || time.Since(s.at) > snapshotFor {
		return nil, 0
	}
	// Changes by others: a creates and g deletes.
	extra := int(r.cversion - (s.cversion + s.own + 1))
	delta := int(r.numChildren) - (len(s.q) + 1)
	a, g := (extra+delta)/2, (extra-delta)/2
	if extra < 0 || (extra+delta)%2 != 0 || a != 0 || g < 0 || g > len(s.q) {
		return nil, 0
	}
	c, ok := parseChild(n.path[len(n.parent)+1:])
	if !ok {
		return nil, 0
	}
	return append(s.q[:len(s.q):len(s.q)], c), g
}

// getResult carries the results of a Get through call.
type getResult struct {
	data []byte
	st   *zk.Stat
}

// Refresh implements driver.Driver: it rewrites the node's data (one round
// trip), which proves that the session and the node are alive and restarts
// the lease for those watching the node. It fails with driver.ErrNotHeld
// when the node is gone, belongs to an ended session, or its lease ran out
// by this client's clock (the node is then deleted). The first Refresh
// after Acquire granted a node that was written recently (a waiting node
// is rewritten every third of its TTL) is answered without a round trip:
// the lease it returns is what remains of the TTL since that write.
func (d *Driver) Refresh(ctx context.Context, l driver.Lease) (driver.Lease, error) {
	out, err := d.refresh(ctx, l)
	if err != nil {
		return driver.Lease{}, d.final(ctx, "refresh", l.Key, err)
	}
	return out, nil
}

func (d *Driver) refresh(ctx context.Context, l driver.Lease) (driver.Lease, error) {
	const op = "refresh"
	if err := d.begin(ctx, op, l.Key); err != nil {
		return driver.Lease{}, err
	}
	n, stale, err := d.lookup(op, l)
	if err == errUnknownHere {
		return d.refreshByName(ctx, op, l)
	}
	if err != nil {
		return driver.Lease{}, err
	}
	ttl := l.TTL
	if ttl <= 0 {
		ttl = n.ttl
	}
	if stale {
		return d.recheck(ctx, op, n, ttl, false)
	}
	d.mu.Lock()
	if n.fresh {
		n.fresh = false
		if rem := n.ttl - time.Since(n.written); rem >= n.ttl/2 && rem >= MinTTL {
			out := n.lease(rem.Truncate(time.Millisecond))
			d.mu.Unlock()
			return out, nil
		}
	}
	path := n.path
	d.mu.Unlock()
	sent := time.Now()
	st, err := d.write(ctx, path, ttl)
	if err == nil && st.Czxid != n.czxid {
		err = errNotOurs
	}
	if err != nil {
		if errors.Is(err, zk.ErrNoNode) || errors.Is(err, errNotOurs) {
			d.forget(n)
			return driver.Lease{}, errorf(op, l.Key, fmt.Errorf("%w: %w", driver.ErrNotHeld, errNodeGone))
		}
		if ctx.Err() != nil {
			return driver.Lease{}, errorf(op, l.Key, ctx.Err())
		}
		return driver.Lease{}, fail(op, l.Key, err)
	}
	d.mu.Lock()
	n.written, n.mzxid, n.ttl = sent, st.Mzxid, ttl
	out := n.lease(ttl)
	d.mu.Unlock()
	return out, nil
}

// lookup returns the driver's node for l if it is a hold: granted, in
// l.Mode, with token l.Token (unless 0), of the current session. stale
// reports that its lease ran out by this client's clock since this
// driver last wrote it (another driver may have rewritten it since: see
// recheck). It returns errUnknownHere when the driver has no node for l,
// and an error wrapping driver.ErrNotHeld when l is not a hold.
func (d *Driver) lookup(op string, l driver.Lease) (n *node, stale bool, err error) {
	d.mu.Lock()
	n = d.nodes[nodeKey{l.Key, l.Owner}]
	var why error
	switch {
	case n == nil:
		d.mu.Unlock()
		return nil, false, errUnknownHere
	case !n.granted:
		why = errors.New("queued, not granted")
	case n.mode != l.Mode:
		why = fmt.Errorf("held in %v mode", n.mode)
	case l.Token != 0 && uint64(n.czxid) != l.Token:
		why = fmt.Errorf("held with token %d", n.czxid)
	case n.lost != nil:
		why = n.lost
	}
	stale = time.Since(n.written) >= n.ttl
	lost := n.lost
	session := n.session
	d.mu.Unlock()
	if why == nil {
		if st := d.sess.state(session); st == nil || st.over() || session != d.conn.SessionID() {
			why = errSessionEnded
			lost = why
		}
	}
	if why == nil {
		return n, stale, nil
	}
	if lost != nil {
		d.forget(n)
	}
	return nil, false, errorf(op, l.Key, fmt.Errorf("%w: %w", driver.ErrNotHeld, why))
}

// recheck decides about a hold whose lease ran out by this client's
// clock: it is over unless another driver rewrote the node since this one
// last did. Then the server's clock decides: the node is rewritten (with
// ttl) and the lease is alive if that write came less than the node's TTL
// after the other one. A lease found over is deleted and
// driver.ErrNotHeld returned. With release set, a live hold is deleted
// too (and the lease returned, with no error).
func (d *Driver) recheck(ctx context.Context, op string, n *node, ttl time.Duration, release bool) (driver.Lease, error) {
	d.mu.Lock()
	path, mzxid := n.path, n.mzxid
	d.mu.Unlock()
	over := func(why string) (driver.Lease, error) {
		_ = d.dropNode(ctx, n)
		return driver.Lease{}, errorf(op, n.key, fmt.Errorf("%w: %s", driver.ErrNotHeld, why))
	}
	failed := func(err error) (driver.Lease, error) {
		if ctx.Err() != nil {
			return driver.Lease{}, errorf(op, n.key, ctx.Err())
		}
		return driver.Lease{}, fail(op, n.key, err)
	}
	got, err := call(ctx, func() (getResult, error) {
		data, st, err := d.conn.Get(path)
		return getResult{data, st}, err
	}, nil)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		d.forget(n)
		return driver.Lease{}, errorf(op, n.key, fmt.Errorf("%w: %w", driver.ErrNotHeld, errNodeGone))
	case err != nil:
		return failed(err)
	case got.st.Czxid != n.czxid || got.st.EphemeralOwner != n.session:
		d.forget(n)
		return driver.Lease{}, errorf(op, n.key, fmt.Errorf("%w: %w", driver.ErrNotHeld, errNotOurs))
	case got.st.Mzxid == mzxid:
		return over("the lease ran out")
	}
	old, ok := decodeTTL(got.data)
	if !ok {
		old = n.ttl
	}
	sent := time.Now()
	st, err := call(ctx, func() (*zk.Stat, error) { return d.conn.Set(path, encodeTTL(ttl), got.st.Version) }, nil)
	switch {
	case errors.Is(err, zk.ErrBadVersion):
		// Rewritten again meanwhile: alive. Write it once more.
		st, err = d.write(ctx, path, ttl)
		if err != nil {
			return failed(err)
		}
	case errors.Is(err, zk.ErrNoNode):
		d.forget(n)
		return driver.Lease{}, errorf(op, n.key, fmt.Errorf("%w: %w", driver.ErrNotHeld, errNodeGone))
	case err != nil:
		return failed(err)
	case time.Duration(st.Mtime-got.st.Mtime)*time.Millisecond >= old:
		return over("the lease ran out")
	}
	d.mu.Lock()
	n.written, n.mzxid, n.ttl = sent, st.Mzxid, ttl
	out := n.lease(ttl)
	d.mu.Unlock()
	if release {
		if err := d.dropNode(ctx, n); err != nil {
			return failed(err)
		}
	}
	return out, nil
}

// maxMulti bounds the operations of one multi request.
const maxMulti = 500

// RefreshBatch implements driver.BatchRefresher: the leases' nodes are
// rewritten by one multi request per 500 leases. A multi is all or
// nothing: when a node is gone, the multi fails, that lease gets
// driver.ErrNotHeld and the others are sent again without it.
func (d *Driver) RefreshBatch(ctx context.Context, ls []driver.Lease) []error {
	errs := d.refreshBatch(ctx, ls)
	for i, err := range errs {
		errs[i] = d.final(ctx, "refresh", ls[i].Key, err)
	}
	return errs
}

func (d *Driver) refreshBatch(ctx context.Context, ls []driver.Lease) []error {
	const op = "refresh"
	errs := make([]error, len(ls))
	if err := d.begin(ctx, op, ""); err != nil {
		for i, l := range ls {
			errs[i] = d.begin(ctx, op, l.Key)
		}
		return errs
	}
	type item struct {
		i    int
		n    *node
		path string
		ttl  time.Duration
	}
	var items []item
	for i, l := range ls {
		n, stale, err := d.lookup(op, l)
		if err == errUnknownHere {
			_, errs[i] = d.refreshByName(ctx, op, l)
			continue
		}
		if err != nil {
			errs[i] = err
			continue
		}
		ttl := l.TTL
		if ttl <= 0 {
			ttl = n.ttl
		}
		if stale {
			_, errs[i] = d.recheck(ctx, op, n, ttl, false)
			continue
		}
		d.mu.Lock()
		n.fresh = false
		items = append(items, item{i, n, n.path, ttl})
		d.mu.Unlock()
	}
	for len(items) > 0 {
		chunk := items[:min(len(items), maxMulti)]
		ops := make([]any, len(chunk))
		for j, it := range chunk {
			ops[j] = &zk.SetDataRequest{Path: it.path, Data: encodeTTL(it.ttl), Version: -1}
		}
		sent := time.Now()
		res, err := call(ctx, func() ([]zk.MultiResponse, error) { return d.conn.Multi(ops...) }, nil)
		session := d.conn.SessionID()
		if err != nil && len(res) == len(chunk) {
			// One operation failed and the rest were rolled back: the
			// failed one names its error.
			failed := -1
			for j, r := range res {
				if r.Error != nil {
					failed = j
					break
				}
			}
			if failed >= 0 && errors.Is(res[failed].Error, zk.ErrNoNode) {
				it := chunk[failed]
				d.forget(it.n)
				errs[it.i] = errorf(op, ls[it.i].Key, fmt.Errorf("%w: %w", driver.ErrNotHeld, errNodeGone))
				items = append(append(items[:0:0], chunk[:failed]...), append(chunk[failed+1:], items[len(chunk):]...)...)
				continue
			}
		}
		if err != nil {
			for _, it := range chunk {
				if ctx.Err() != nil {
					errs[it.i] = errorf(op, ls[it.i].Key, ctx.Err())
				} else {
					errs[it.i] = fail(op, ls[it.i].Key, err)
				}
			}
			items = items[len(chunk):]
			continue
		}
		d.mu.Lock()
		for j, it := range chunk {
			st := res[j].Stat
			if st == nil || st.Czxid != it.n.czxid || st.EphemeralOwner != it.n.session || st.EphemeralOwner != session {
				errs[it.i] = errorf(op, ls[it.i].Key, fmt.Errorf("%w: %w", driver.ErrNotHeld, errNotOurs))
				continue
			}
			it.n.written, it.n.mzxid, it.n.ttl = sent, st.Mzxid, it.ttl
		}
		d.mu.Unlock()
		items = items[len(chunk):]
	}
	return errs
}

// Release implements driver.Driver: it deletes l's node (one round trip)
// if l is a live hold of this driver, and any node the owner has in the
// key's queue. It returns driver.ErrNotHeld when l was not held: never
// granted, released, of an ended session, or past its lease by this
// client's clock (its node is deleted all the same).
func (d *Driver) Release(ctx context.Context, l driver.Lease) error {
	return d.final(ctx, "release", l.Key, d.release(ctx, l))
}

func (d *Driver) release(ctx context.Context, l driver.Lease) error {
	const op = "release"
	if err := d.begin(ctx, op, l.Key); err != nil {
		return err
	}
	d.mu.Lock()
	n := d.nodes[nodeKey{l.Key, l.Owner}]
	d.mu.Unlock()
	if n == nil {
		// Not known here: a node of this owner may still exist (a
		// create whose reply was lost, by an earlier incarnation of
		// this driver). Look for it by name.
		return d.releaseByName(ctx, op, l)
	}
	d.mu.Lock()
	path, granted, lost := n.path, n.granted, n.lost
	session := n.session
	matches := n.mode == l.Mode && (l.Token == 0 || uint64(n.czxid) == l.Token)
	stale := time.Since(n.written) >= n.ttl
	ttl := n.ttl
	d.mu.Unlock()
	if path == "" {
		d.forget(n)
		return d.releaseByName(ctx, op, l)
	}
	if granted && !matches {
		return errorf(op, l.Key, fmt.Errorf("%w: the owner's hold is another one", driver.ErrNotHeld))
	}
	if lost != nil || session != d.conn.SessionID() {
		d.forget(n)
		return errorf(op, l.Key, fmt.Errorf("%w: %w", driver.ErrNotHeld, errSessionEnded))
	}
	if granted && stale {
		_, err := d.recheck(ctx, op, n, ttl, true)
		return err
	}
	_, err := call(ctx, func() (struct{}, error) { return struct{}{}, d.conn.Delete(path, -1) }, nil)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		if ctx.Err() != nil {
			return errorf(op, l.Key, ctx.Err())
		}
		return fail(op, l.Key, err)
	}
	d.forget(n)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return errorf(op, l.Key, fmt.Errorf("%w: %w", driver.ErrNotHeld, errNodeGone))
	case !granted:
		return errorf(op, l.Key, fmt.Errorf("%w: queued, not granted (the queue place was removed)", driver.ErrNotHeld))
	}
	return nil
}

// releaseByName releases a lease this driver does not know: granted by
// another driver, or left by a create whose outcome was not known. It
// deletes the nodes of l.Owner in the key's queue, and returns nil if one
// of them was a hold matching l (in l.Mode, first in the queue or behind
// shared nodes only, with token l.Token unless it is 0).
func (d *Driver) releaseByName(ctx context.Context, op string, l driver.Lease) error {
	parent := d.parentPath(l.Key)
	names, err := call(ctx, func() ([]string, error) {
		names, _, err := d.conn.Children(parent)
		return names, err
	}, nil)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		if ctx.Err() != nil {
			return errorf(op, l.Key, ctx.Err())
		}
		return fail(op, l.Key, err)
	}
	q := parseQueue(names)
	released := false
	for _, c := range q.ofOwner(l.Owner) {
		p := parent + "/" + c.name
		version := int32(-1)
		match := false
		if c.mode == l.Mode && len(q.blockers(q.index(c.name), c.mode)) == 0 {
			got, err := call(ctx, func() (getResult, error) {
				data, st, err := d.conn.Get(p)
				return getResult{data, st}, err
			}, nil)
			if err == nil && (l.Token == 0 || uint64(got.st.Czxid) == l.Token) {
				match, version = true, got.st.Version
			}
		}
		_, err := call(ctx, func() (struct{}, error) { return struct{}{}, d.conn.Delete(p, version) }, nil)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			if ctx.Err() != nil {
				return errorf(op, l.Key, ctx.Err())
			}
			return fail(op, l.Key, err)
		}
		if err == nil && match {
			released = true
		}
	}
	if released {
		return nil
	}
	return errorf(op, l.Key, fmt.Errorf("%w: no such hold", driver.ErrNotHeld))
}

// errUnknownHere is held's answer for a lease this driver has no node
// for: granted by another driver, or before this driver was made.
var errUnknownHere = errors.New("zkdriver: lease unknown to this driver")

// refreshByName refreshes a lease this driver does not know, granted by
// another driver: it finds l.Owner's node in the key's queue, checks that
// it is a hold in l.Mode with token l.Token (unless 0), and rewrites it.
// Not having seen the lease granted, this driver cannot judge its expiry
// by its own clock: it uses the server's, the node's modification time,
// before and after the rewrite. It takes three round trips.
func (d *Driver) refreshByName(ctx context.Context, op string, l driver.Lease) (driver.Lease, error) {
	parent := d.parentPath(l.Key)
	notHeld := func(why string) (driver.Lease, error) {
		return driver.Lease{}, errorf(op, l.Key, fmt.Errorf("%w: %s", driver.ErrNotHeld, why))
	}
	failed := func(err error) (driver.Lease, error) {
		if ctx.Err() != nil {
			return driver.Lease{}, errorf(op, l.Key, ctx.Err())
		}
		return driver.Lease{}, fail(op, l.Key, err)
	}
	names, err := call(ctx, func() ([]string, error) {
		names, _, err := d.conn.Children(parent)
		return names, err
	}, nil)
	if errors.Is(err, zk.ErrNoNode) {
		return notHeld("no such hold")
	}
	if err != nil {
		return failed(err)
	}
	q := parseQueue(names)
	var c *child
	for _, x := range q.ofOwner(l.Owner) {
		if x.mode == l.Mode {
			c = &x
			break
		}
	}
	if c == nil {
		return notHeld("no such hold")
	}
	if len(q.blockers(q.index(c.name), c.mode)) > 0 {
		return notHeld("queued, not granted")
	}
	path := parent + "/" + c.name
	ttl := l.TTL
	for range 3 {
		got, err := call(ctx, func() (getResult, error) {
			data, st, err := d.conn.Get(path)
			return getResult{data, st}, err
		}, nil)
		if errors.Is(err, zk.ErrNoNode) {
			return notHeld("the node is gone")
		}
		if err != nil {
			return failed(err)
		}
		if l.Token != 0 && uint64(got.st.Czxid) != l.Token {
			return notHeld("another hold of the owner")
		}
		old, ok := decodeTTL(got.data)
		if !ok {
			old = ttl
		}
		if ttl <= 0 {
			ttl = old
		}
		st, err := call(ctx, func() (*zk.Stat, error) { return d.conn.Set(path, encodeTTL(ttl), got.st.Version) }, nil)
		switch {
		case errors.Is(err, zk.ErrBadVersion):
			continue // refreshed meanwhile: look again
		case errors.Is(err, zk.ErrNoNode):
			return notHeld("the node is gone")
		case err != nil:
			return failed(err)
		}
		if time.Duration(st.Mtime-got.st.Mtime)*time.Millisecond >= old {
			// The lease had run out, by the server's clock: do not
			// bring it back.
			_, _ = call(ctx, func() (struct{}, error) { return struct{}{}, d.conn.Delete(path, st.Version) }, nil)
			return notHeld("the lease ran out")
		}
		return driver.Lease{Key: l.Key, Owner: l.Owner, Mode: l.Mode, Token: uint64(st.Czxid), TTL: ttl}, nil
	}
	return failed(errors.New("the node kept changing"))
}
