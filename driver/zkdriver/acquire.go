package zkdriver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
	"github.com/go-zookeeper/zk"
)

// Acquire implements driver.Acquirer: it creates the owner's lock node at
// the end of the key's queue and waits until nothing before it blocks it
// (see queueWait). It fails when its session ends, its node disappears or
// ctx is done, and then deletes its node (in the background if ctx is
// done).
func (d *Driver) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	l, err := d.acquire(ctx, req)
	return d.finalLease(ctx, l, err)
}

func (d *Driver) acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	const op = "acquire"
	if err := d.beginRequest(ctx, op, req); err != nil {
		return driver.Lease{}, err
	}
	parent, prefix := d.lockPaths(req)
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
	if n == nil {
		var r createResult
		var err error
		n, r, err = d.create(ctx, op, req, parent, prefix)
		if err != nil {
			return driver.Lease{}, err
		}
		if r.numChildren == 1 {
			return d.grant(n, true), nil
		}
	}
	d.hot.Refused(req.Key)
	l, err := d.wait(ctx, n, req)
	if err != nil {
		_ = d.dropNode(ctx, n)
		return driver.Lease{}, callFailed(ctx, op, req.Key, err)
	}
	return l, nil
}

// wait waits until n is granted; see Acquire and queueWait.
func (d *Driver) wait(ctx context.Context, n *node, req driver.Request) (driver.Lease, error) {
	d.mu.Lock()
	parent, path, ttl, written, session := n.parent, n.path, n.ttl, n.written, n.session
	d.mu.Unlock()
	st := d.state(session)
	if !live(st) {
		return driver.Lease{}, errSessionEnded
	}
	w := &queueWait{
		d: d, ctx: ctx, n: n, req: req, st: st,
		parent: parent, path: path, name: path[len(parent)+1:], ttl: ttl,
		list: true, wantKids: req.Limit > 0,
		keepAlive: time.NewTimer(max(time.Until(written.Add(ttl/3)), 0)),
		expiry:    time.NewTimer(time.Hour),
		reconn:    d.sess.nextSession(),
	}
	w.expiry.Stop()
	defer w.keepAlive.Stop()
	defer w.expiry.Stop()
	for {
		r, err := w.step()
		switch {
		case err != nil:
			return driver.Lease{}, err
		case r == waitGranted:
			return d.grant(n, true), nil
		}
	}
}

// A queueWait is an Acquire whose node n waits in the key's queue. It
// watches the node it waits for (pred) and the blocking node before that
// one (pprev), and lists the queue again when pprev goes, so that when
// pred goes it knows whether n is granted without a round trip: the
// fast handoff. Meanwhile it rewrites n every third of
// its TTL (keepAlive), deletes pred when its lease expires (expiry), and
// looks again after a reconnection, whose watches may have been lost.
type queueWait struct {
	d   *Driver
	ctx context.Context
	n   *node
	req driver.Request
	st  *zkSession // n's session

	parent, path, name string        // n's key node, path and name
	ttl                time.Duration // n's lease

	keepAlive    *time.Timer       // when to rewrite n
	expiry       *time.Timer       // when pred's lease runs out, if not rewritten
	retry        driverkit.Backoff // transient errors: 10ms doubling to 1s
	failingSince time.Time         // since when nothing got through, or zero
	reconn       <-chan struct{}   // closed when the connection is back (Session.reconnected)

	list     bool   // the queue must be listed
	pred     string // the node waited for
	only     bool   // pred is the last node in the way
	predCh   <-chan zk.Event
	predVer  int32
	seenZxid int64 // pred's version, first seen at seenAt
	seenAt   time.Time
	pprev    string // the blocking node before pred, if any
	pprevCh  <-chan zk.Event

	// A counted node at the head of the waiters watches the children.
	head     bool            // every node before n is granted
	wantKids bool            // list with a watch on the children
	kidsCh   <-chan zk.Event // the watch, while head
}

// waitResult is what a part of a queueWait's step found.
type waitResult int

const (
	waitOn      waitResult = iota // go on with the step
	waitAgain                     // start the next step
	waitGranted                   // n is granted
)

// step makes one round of the wait: list the queue if needed, read (and
// watch) pred and pprev if needed, then wait for an event.
func (w *queueWait) step() (waitResult, error) {
	if w.list {
		if r, err := w.relist(); r != waitOn || err != nil {
			return r, err
		}
	}
	if w.predCh == nil {
		if r, err := w.readPred(); r != waitOn || err != nil {
			return r, err
		}
	}
	if w.pprev != "" && w.pprevCh == nil {
		if r, err := w.readPprev(); r != waitOn || err != nil {
			return r, err
		}
	}
	return w.await()
}

// relist lists the queue and aims the wait at what blocks n.
func (w *queueWait) relist() (waitResult, error) {
	var names []string
	var kids <-chan zk.Event
	var err error
	if w.req.Limit > 0 && w.wantKids {
		names, kids, err = w.d.childrenW(w.ctx, w.parent)
	} else {
		names, err = w.d.children(w.ctx, w.parent)
	}
	if errors.Is(err, zk.ErrNoNode) {
		return 0, errNodeGone
	}
	if err != nil {
		return waitAgain, w.pause(err)
	}
	w.ok()
	q := parseQueue(names)
	if err := w.d.checkForeignLayout(w.parent, q); err != nil {
		return 0, err
	}
	w.list = false
	i := q.index(w.name)
	if i < 0 {
		return 0, errNodeGone
	}
	granted, lerr := q.judge(i, w.req.Mode, w.req.Limit, w.req.Weight)
	if lerr != nil {
		return 0, lerr
	}
	if granted {
		if w.req.Limit > 0 && i < len(q)-1 {
			// Tell a waiter behind that took n for a waiter (see
			// aimCounted).
			if err := w.keep(); err != nil {
				return 0, err
			}
		}
		return waitGranted, nil
	}
	if w.req.Limit > 0 {
		return w.aimCounted(q, i, kids)
	}
	w.aim(q.blockers(i, w.req.Mode))
	return waitOn, nil
}

// aimCounted aims the wait of a counted node n, at index i of q and not
// granted. While a node before it waits, n watches the node just before it
// (rewritten by its owner when granted). Once every node before n is
// granted, n watches the key's children, and the first node to time its
// lease. A release wakes the head waiter only, a grant the one behind.
func (w *queueWait) aimCounted(q queue, i int, kids <-chan zk.Event) (waitResult, error) {
	head := q.held() == i
	if head && kids == nil {
		// Listed without a watch: list again with one.
		w.wantKids, w.list = true, true
		return waitAgain, nil
	}
	w.head, w.wantKids, w.kidsCh = head, head, nil
	p := q[i-1]
	if head {
		p, w.kidsCh = q[0], kids
	}
	w.setPred(p.name)
	w.only = false
	w.pprev, w.pprevCh = "", nil
	return waitOn, nil
}

// aim makes the last of b, the nodes that block n, pred, and the one
// before it pprev.
func (w *queueWait) aim(b []child) {
	w.setPred(b[len(b)-1].name)
	w.only = len(b) == 1
	pp := ""
	if !w.only {
		pp = w.parent + "/" + b[len(b)-2].name
	}
	if pp != w.pprev {
		w.pprev, w.pprevCh = pp, nil
	}
}

// setPred makes the node named name pred; another node than before is
// read again and its lease timed anew.
func (w *queueWait) setPred(name string) {
	if p := w.parent + "/" + name; p != w.pred {
		w.pred, w.predCh, w.seenZxid = p, nil, 0
		w.expiry.Stop()
	}
}

// readPred reads and watches pred, timing its lease from the moment its
// current version was first seen.
func (w *queueWait) readPred() (waitResult, error) {
	data, st, ch, err := w.d.getW(w.ctx, w.pred)
	recv := time.Now()
	if errors.Is(err, zk.ErrNoNode) {
		if w.only {
			return waitGranted, nil
		}
		w.list = true
		return waitAgain, nil
	}
	if err != nil {
		return waitAgain, w.pause(err)
	}
	w.ok()
	w.predCh, w.predVer = ch, st.Version
	if st.Mzxid != w.seenZxid {
		// A new version: its lease runs from now at the earliest.
		w.seenZxid, w.seenAt = st.Mzxid, recv
	}
	w.expiry.Stop()
	if predTTL, ok := leaseTTL(w.pred, data); ok { // none for a foreign node
		w.expiry.Reset(max(time.Until(w.seenAt.Add(predTTL)), 0))
	}
	return waitOn, nil
}

// readPprev watches pprev.
func (w *queueWait) readPprev() (waitResult, error) {
	_, _, ch, err := w.d.getW(w.ctx, w.pprev)
	if errors.Is(err, zk.ErrNoNode) {
		w.list = true
		return waitAgain, nil
	}
	if err != nil {
		return waitAgain, w.pause(err)
	}
	w.ok()
	w.pprevCh = ch
	return waitOn, nil
}

// await waits for the next event.
func (w *queueWait) await() (waitResult, error) {
	select {
	case ev := <-w.predCh:
		w.predCh = nil
		return w.predEvent(ev)
	case ev := <-w.pprevCh:
		w.pprevCh = nil
		if ev.Type != zk.EventNodeDataChanged {
			w.list = true // gone, or the watch dropped: look again
		}
	case <-w.kidsCh:
		w.kidsCh = nil
		w.list = true
	case <-w.reconn:
		w.reconnected()
	case <-w.expiry.C:
		return w.reclaimPred()
	case <-w.keepAlive.C:
		return waitAgain, w.keep()
	case <-w.st.Context().Done():
		return 0, w.ended()
	case <-w.ctx.Done():
		return 0, w.ctx.Err()
	}
	return waitAgain, nil
}

// reconnected makes the wait list the queue again and watch anew: watches
// may have been lost with the old connection, and what they watched
// changed meanwhile.
func (w *queueWait) reconnected() {
	w.reconn = w.d.sess.nextSession()
	w.list = true
	w.predCh, w.pprevCh, w.kidsCh = nil, nil, nil
}

// predEvent handles an event of pred's watch.
func (w *queueWait) predEvent(ev zk.Event) (waitResult, error) {
	switch ev.Type {
	case zk.EventNodeDeleted:
		if w.only {
			return waitGranted, nil
		}
		w.list = true
	case zk.EventNodeDataChanged:
		// Rewritten: read it again (and restart its lease). A counted
		// node's waiting pred may have been granted: look at the queue.
		if w.req.Limit > 0 && !w.head {
			w.list = true
		}
	default:
		// The watch was dropped (session expired, or the connection
		// closed): look again.
		if !live(w.st) {
			return 0, w.ended()
		}
		if err := w.pause(ev.Err); err != nil {
			return 0, err
		}
		w.list = true
	}
	return waitAgain, nil
}

// reclaimPred deletes pred, not rewritten for its whole TTL since this
// version was seen; the delete names the version, so a refresh wins.
func (w *queueWait) reclaimPred() (waitResult, error) {
	pred, ver := w.pred, w.predVer
	err := w.d.del(w.ctx, pred, ver)
	w.predCh = nil // read it again
	switch {
	case err == nil, errors.Is(err, zk.ErrNoNode):
		if w.only {
			return waitGranted, nil
		}
		w.list = true
	case errors.Is(err, zk.ErrBadVersion):
	default:
		if err := w.pause(err); err != nil {
			return 0, err
		}
	}
	return waitAgain, nil
}

// keep rewrites n's node; it returns an error when the node is gone.
func (w *queueWait) keep() error {
	switch err := w.d.rewrite(w.ctx, w.n, w.ttl); {
	case err == nil:
		w.keepAlive.Reset(w.ttl / 3)
	case errors.Is(err, errNodeGone):
		return err
	case w.ctx.Err() != nil:
		return w.ctx.Err()
	default:
		w.keepAlive.Reset(min(w.ttl/10, time.Second))
	}
	return nil
}

// pause waits after a transient error; it returns an error when the wait
// must end instead.
func (w *queueWait) pause(cause error) error {
	if w.ctx.Err() != nil {
		return w.ctx.Err()
	}
	if !live(w.st) {
		return w.ended()
	}
	if isPermanent(cause) || errors.Is(cause, zk.ErrClosing) {
		return cause
	}
	if err := w.d.closedErr(); err != nil {
		return err
	}
	if w.failingSince.IsZero() {
		w.failingSince = time.Now()
	} else if time.Since(w.failingSince) > w.d.timeout(w.st) {
		return fmt.Errorf("zkdriver: no answer from ZooKeeper for longer than the session timeout %v: %w", w.d.timeout(w.st), cause)
	}
	t := time.NewTimer(w.retry.Next())
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-w.reconn:
		// The connection is back: try again at once.
		w.reconnected()
		return nil
	case <-w.st.Context().Done():
		return w.ended()
	case <-w.ctx.Done():
		return w.ctx.Err()
	}
}

// ok records that a request got through.
func (w *queueWait) ok() {
	w.retry.Reset()
	w.failingSince = time.Time{}
}

// ended returns the error of a wait whose session is over.
func (w *queueWait) ended() error {
	return fmt.Errorf("%w: %w", errSessionEnded, context.Cause(w.st.Context()))
}
