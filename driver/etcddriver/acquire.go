package etcddriver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// errEntryLost reports that an entry vanished during a call: its lease
// expired or was revoked.
var errEntryLost = errors.New("the entry vanished (its lease expired or was revoked)")

// cleanupTimeout bounds the removal of a queue entry after a failed wait.
const cleanupTimeout = 10 * time.Second

// Acquire implements driver.Acquirer: it puts req.Owner's entry in the
// key's queue and waits on the key's watch until it is granted (see
// docs/etcddriver.md). It returns an error, never the lock, if the entry
// vanishes, and deletes its entry on error.
func (d *Driver) Acquire(ctx context.Context, req driver.Request) (_ driver.Lease, err error) {
	defer func() { err = d.errs.Wrap(ctx, "acquire", req.Key, err) }()
	rctx, ttl := d.request(ctx), int64(req.TTL/time.Second)
	if err := d.begin(rctx); err != nil {
		return driver.Lease{}, err
	}
	base := d.base(req.Key)
	w := d.watch(base)
	defer w.release()
	wt := &waiter{signal: make(chan struct{}, 1)}
	w.add(wt)
	defer w.remove(wt)
	if err := w.waitReady(rctx); err != nil {
		return driver.Lease{}, err
	}
	e, token, done, err := d.join(rctx, req, base, ttl, wt)
	defer func() {
		if err != nil && e.key != "" { // the entry may exist on the server
			d.removeEntry(rctx, req, e.key)
		}
	}()
	switch {
	case err != nil:
		return driver.Lease{}, err
	case done:
		return d.granted(req, e.key, token)
	}
	q := &queueWait{d: d, req: req, e: e, w: w, wt: wt}
	return q.run(rctx)
}

// join puts req.Owner's entry in the key's queue, on a lease of ttl
// seconds, and arms wt with the older conflicting entries. It returns the
// entry (its key empty if none may exist) and, when granted, its token.
func (d *Driver) join(ctx context.Context, req driver.Request, base string, ttl int64, wt *waiter) (e entry, token int64, done bool, err error) {
	for attempt := 0; ; attempt++ {
		// The entry's lease need not be proved here: while the entry
		// waits it is renewed a third of its TTL after it was last known
		// alive, and a grant counts from then (see granted).
		var isNew bool
		e, isNew, _, err = d.entryFor(ctx, req, base, ttl)
		if err != nil {
			return entry{}, 0, false, err
		}
		token, done, err = d.enqueue(ctx, req, e, isNew, wt)
		if err != nil && attempt == 0 && errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseNotFound) {
			d.forget(req.Owner, e.key)
			continue // the lease ended: start over with a new one
		}
		return e, token, done, err
	}
}

// A queueWait is an Acquire whose entry waits in the key's queue: until
// the older conflicting entries are gone, it renews the entry's lease.
type queueWait struct {
	d   *Driver
	req driver.Request
	e   entry
	w   *keyWatch
	wt  *waiter

	renew  *time.Timer
	ka     *kaCall // the last keep-alive of the entry's lease
	kaDone <-chan struct{}
	// After the watch was re-created the queue is read again (resync),
	// retried for as long as the entry is known to live.
	resync bool
	retry  <-chan time.Time
	bo     driverkit.Backoff
}

// run waits until the entry is granted, it is lost, ctx is done or the
// driver or its client is closed.
func (q *queueWait) run(ctx context.Context) (driver.Lease, error) {
	next, _ := q.next(false)
	q.renew = time.NewTimer(next)
	defer q.renew.Stop()
	for {
		select {
		case <-q.wt.signal:
		case <-q.retry:
			q.retry = nil
		case <-q.renew.C:
			q.ka = q.d.keepAlive(q.e.lease)
			q.kaDone = q.ka.done
			continue
		case <-q.kaDone:
			q.kaDone = nil
			if err := q.renewed(); err != nil {
				return driver.Lease{}, err
			}
			continue
		case <-q.w.done:
			// The watch ended with the driver or its client.
			return driver.Lease{}, q.d.closedErr()
		case <-ctx.Done():
			return driver.Lease{}, ctx.Err()
		}
		if l, done, err := q.check(ctx); done {
			return l, err
		}
	}
}

// renewed takes the reply to the entry's keep-alive and sets the time of
// the next one. It returns an error when the entry is lost.
func (q *queueWait) renewed() error {
	switch {
	case q.ka.err == nil && q.ka.ttl <= 0:
		return errEntryLost
	case q.ka.err == nil:
		q.d.confirm(q.req.Owner, q.e.key, q.ka.sent, 0)
	}
	next, alive := q.next(q.ka.err != nil)
	switch {
	case !alive && q.ka.err != nil:
		return fmt.Errorf("renewing the queue entry: %w", q.ka.err)
	case !alive:
		return errEntryLost // its lease ended, as the driver's sentinel watch saw
	}
	q.renew.Reset(next)
	return nil
}

// next returns the time until the entry's next keep-alive: a third of its
// TTL after it was last known alive or, after a failed one (retry), the
// shorter of a tenth of the TTL and half the time it is known to live.
func (q *queueWait) next(retry bool) (next time.Duration, alive bool) {
	e, ok := q.d.lookup(q.req.Owner, q.e.key)
	left, ttl := time.Until(e.deadline), time.Duration(e.ttl)*time.Second
	if retry {
		return min(ttl/10, max(left/2, 10*time.Millisecond)), ok && left > 0
	}
	return max(left-ttl+ttl/3, 0), ok && left > 0
}

// check looks at the waiter after a change. done reports that the wait is
// over: the entry is granted (the lease) or lost (the error).
func (q *queueWait) check(ctx context.Context) (_ driver.Lease, done bool, _ error) {
	gone, reset, token, granted := q.wt.state()
	if reset {
		q.resync = true
	}
	switch {
	case gone:
		return driver.Lease{}, true, errEntryLost
	case q.resync && q.retry == nil:
		return q.reread(ctx)
	case granted && !q.resync:
		if err := q.afterPred(ctx); err != nil {
			return driver.Lease{}, true, err
		}
		l, err := q.d.granted(q.req, q.e.key, token)
		return l, true, err
	}
	return driver.Lease{}, false, nil
}

// afterPred delays by Options.LockDelay a grant that followed the end of
// the predecessor's lease rather than its release (see Losing a hold in
// the package documentation): the predecessor left at revision rev by its
// lease's end unless this driver's Delete removed it then, and exactly
// when its sentinel is gone at rev.
func (q *queueWait) afterPred(ctx context.Context) error {
	d := q.d
	key, sentinel, rev := q.wt.lastLeft()
	if d.lockDelay <= 0 || sentinel == "" {
		return nil
	}
	if d.releasedAt(ctx, key, rev) {
		return nil
	}
	ended, err := d.leaseEndedAt(ctx, sentinel, rev)
	if err != nil || !ended {
		return err
	}
	t := time.NewTimer(d.lockDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	case <-q.w.done:
		return d.closedErr()
	}
	if gone, _, _, _ := q.wt.state(); gone {
		return errEntryLost
	}
	return nil
}

// leaseEndedAt reports whether the lease of sentinel had ended at revision
// rev (see queueWait.afterPred).
func (d *Driver) leaseEndedAt(ctx context.Context, sentinel string, rev int64) (bool, error) {
	resp, err := d.kv.Get(ctx, sentinel, clientv3.WithRev(rev), clientv3.WithSerializable(), clientv3.WithCountOnly())
	if err != nil {
		if ctx.Err() != nil {
			return false, err
		}
		// A member behind rev (etcd sends events a moment before its
		// reads may ask for them), or rev compacted: read the present.
		if resp, err = d.kv.Get(ctx, sentinel, clientv3.WithCountOnly()); err != nil {
			return false, err
		}
	}
	return resp.Count == 0, nil
}

// reread reads the queue again after the key's watch was re-created, and
// arms the waiter anew; a failed read is retried later (see queueWait).
func (q *queueWait) reread(ctx context.Context) (_ driver.Lease, done bool, _ error) {
	token, granted, err := q.d.enqueue(ctx, q.req, q.e, false, q.wt)
	switch {
	case errors.Is(err, errEntryLost):
		return driver.Lease{}, true, err
	case err != nil:
		if _, alive := q.next(true); ctx.Err() != nil || !alive {
			return driver.Lease{}, true, err
		}
		q.retry = time.After(q.bo.Next())
		return driver.Lease{}, false, nil
	}
	q.resync = false
	q.bo.Reset()
	if !granted {
		return driver.Lease{}, false, nil
	}
	l, err := q.d.granted(q.req, q.e.key, token)
	return l, true, err
}

// granted returns the lease of a granted entry, unless its lease may have
// run out meanwhile; Lease.Start is when the lease was last proved.
func (d *Driver) granted(req driver.Request, k string, token int64) (driver.Lease, error) {
	e, ok := d.lookup(req.Owner, k)
	if !ok || !time.Now().Before(e.deadline) {
		return driver.Lease{}, errEntryLost
	}
	d.confirm(req.Owner, k, time.Time{}, token)
	ttl := time.Duration(e.ttl) * time.Second
	return driver.Lease{Key: req.Key, Owner: req.Owner, Mode: req.Mode, Token: uint64(token), TTL: ttl, Start: e.deadline.Add(-ttl)}, nil
}

// enqueue puts (or keeps) e, the entry of req, in its queue (see put) and
// arms wt with the older entries it must look at. done reports that the
// entry is granted, with token.
func (d *Driver) enqueue(ctx context.Context, req driver.Request, e entry, isNew bool, wt *waiter) (token int64, done bool, err error) {
	a, err := d.put(ctx, req, e, isNew, true, true)
	switch {
	case err != nil:
		return 0, false, err
	case a.granted:
		return a.token, true, nil
	case a.own == nil:
		return 0, false, errEntryLost
	}
	if _, ok := a.refusal.(*driver.LockedError); !ok {
		return 0, false, a.refusal
	}
	own, c := a.own, classOf(a.own)
	lower := make(map[string]lowerEntry)
	for _, kv := range a.read {
		if kv.CreateRevision < own.CreateRevision {
			o := classOf(kv)
			lower[string(kv.Key)] = lowerEntry{
				sentinel: entrySentinel(d.prefix, kv.Key, kv.Value),
				weight:   o.weight,
				block:    c.dir != counted || o.dir == writers,
			}
		}
	}
	wt.arm(e.key, a.rev, own.CreateRevision, c, lower)
	return own.CreateRevision, false, nil
}

// removeEntry deletes req.Owner's queue entry after a failed wait: in the
// background, within cleanupTimeout (or until the driver is closed), when
// ctx is done, so that Acquire returns by its deadline.
func (d *Driver) removeEntry(ctx context.Context, req driver.Request, k string) {
	remove := func(ctx context.Context) {
		resp, err := d.kv.Delete(ctx, k, clientv3.WithPrevKV())
		if err != nil {
			d.unsure(req.Owner, k) // the record stays, for the front-end's Release
			return
		}
		if e, ok := d.forget(req.Owner, k); ok && !e.unsure && len(resp.PrevKvs) > 0 && clientv3.LeaseID(resp.PrevKvs[0].Lease) == e.lease {
			d.putLease(e.lease, e.ttl, e.deadline)
		}
	}
	switch {
	case d.closedErr() != nil:
		return // nothing can be sent
	case ctx.Err() == nil:
		remove(ctx)
		return
	}
	// The front-end's Release of the owner may run beside the Delete.
	d.unsure(req.Owner, k)
	d.spawn(func() {
		ctx, cancel := context.WithTimeout(d.ctx, cleanupTimeout)
		defer cancel()
		remove(ctx)
	})
}

// A waiter is Acquire's listener on the key's watch: it tracks the older
// entries that are still there, and its own entry.
type waiter struct {
	signal chan struct{} // poked on every change

	mu     sync.Mutex
	key    string // the waiter's own entry
	armed  bool
	rev    int64                 // deletions at or before rev are already accounted for
	token  int64                 // the own entry's create revision
	own    class                 // the own entry's class
	lower  map[string]lowerEntry // older entries it must look at
	last   string                // the sentinel of the lower entry deleted last
	lastK  string                // that entry's key
	lastAt int64                 // the revision of its deletion
	early  []delEvent            // deletions seen before arm
	gone   bool                  // the own entry was deleted
	resets bool                  // the watch was re-created since arm
}

// A lowerEntry is an older entry a waiter looks at.
type lowerEntry struct {
	sentinel string // its lease's sentinel
	weight   int64  // its weight, for a counted waiter
	block    bool   // it conflicts: the waiter waits until it is gone
}

type delEvent struct {
	key string
	rev int64
}

func (wt *waiter) poke() {
	select {
	case wt.signal <- struct{}{}:
	default:
	}
}

func (wt *waiter) deleted(key string, rev int64) {
	wt.mu.Lock()
	if wt.armed {
		wt.apply(key, rev)
	} else {
		wt.early = append(wt.early, delEvent{key, rev})
	}
	wt.mu.Unlock()
	wt.poke()
}

func (wt *waiter) reset() {
	wt.mu.Lock()
	wt.resets = true
	wt.mu.Unlock()
	wt.poke()
}

// apply accounts for a deletion; wt.mu is held.
func (wt *waiter) apply(key string, rev int64) {
	if rev <= wt.rev {
		return
	}
	if key == wt.key {
		if rev > wt.token {
			wt.gone = true
		}
		return
	}
	if le, ok := wt.lower[key]; ok {
		wt.last, wt.lastK, wt.lastAt = le.sentinel, key, rev
		delete(wt.lower, key)
	}
}

// arm starts tracking lower, the older entries seen at revision rev by
// the entry key of class own with create revision token.
func (wt *waiter) arm(key string, rev, token int64, own class, lower map[string]lowerEntry) {
	wt.mu.Lock()
	wt.key, wt.armed, wt.rev, wt.token, wt.own, wt.lower, wt.resets = key, true, rev, token, own, lower, false
	for _, ev := range wt.early {
		wt.apply(ev.key, ev.rev)
	}
	wt.early = nil
	wt.mu.Unlock()
	wt.poke()
}

// fits reports whether the older entries left let the own entry be
// granted (see admit); wt.mu is held.
func (wt *waiter) fits() bool {
	if wt.own.dir != counted {
		return len(wt.lower) == 0
	}
	var sum int64
	for _, le := range wt.lower {
		if le.block || le.weight > wt.own.limit-sum {
			return false
		}
		sum += le.weight
	}
	return wt.own.weight <= wt.own.limit-sum
}

// state reports the waiter's state: its own entry is gone, the watch was
// re-created, or it may be granted (with the entry's token).
func (wt *waiter) state() (gone, reset bool, token int64, granted bool) {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	if wt.resets {
		wt.resets = false
		wt.armed = false
		return wt.gone, true, 0, false
	}
	return wt.gone, false, wt.token, wt.armed && wt.fits()
}

// lastLeft returns the key and the sentinel of the older entry whose
// deletion granted the waiter, and the revision of that deletion.
func (wt *waiter) lastLeft() (key, sentinel string, rev int64) {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	return wt.lastK, wt.last, wt.lastAt
}
