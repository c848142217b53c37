package etcddriver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-locker/locker/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// errEntryLost is returned by Acquire when the waiter's own entry
// vanished while it waited: its lease expired or was revoked.
var errEntryLost = errors.New("the queue entry vanished while waiting (its lease expired or was revoked)")

// cleanupTimeout bounds the removal of a queue entry after a failed wait.
const cleanupTimeout = 10 * time.Second

// Acquire implements driver.Acquirer. It puts req.Owner's entry in the
// key's queue (one transaction, which grants the key at once if nothing
// conflicts) and reads the older conflicting entries; then it waits, on
// the key's watch, until each of them is deleted. New entries always have
// higher create revisions, so that set only shrinks: when it is empty the
// key is granted, in create-revision order, without another read. While
// it waits it renews its entry's lease every third of its TTL; if the
// entry vanishes (expired or revoked lease, issue etcd-io/etcd#11456) it
// returns an error, never the lock. On error it deletes its entry.
func (d *Driver) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	bctx, done := d.bound(ctx)
	defer done()
	l, err := d.acquire(bctx, req)
	if err != nil {
		return driver.Lease{}, d.fail(ctx, "acquire", req.Key, err)
	}
	return l, nil
}

func (d *Driver) acquire(ctx context.Context, req driver.Request) (_ driver.Lease, err error) {
	if err := d.begin(ctx); err != nil {
		return driver.Lease{}, err
	}
	ttl, err := d.checkTTL(req.TTL)
	if err != nil {
		return driver.Lease{}, err
	}
	base := d.base(req.Key)
	w := d.watch(base)
	defer w.release()
	wt := &waiter{signal: make(chan struct{}, 1)}
	w.add(wt)
	defer w.remove(wt)
	if err := w.waitReady(ctx); err != nil {
		return driver.Lease{}, err
	}

	var k string // the entry's key, once it may exist on the server
	defer func() {
		if err != nil && k != "" {
			d.removeEntry(ctx, req, k)
		}
	}()
	var e entry
	for attempt := 0; ; attempt++ {
		// The entry's lease need not be proved here: the front-end confirms
		// a grant with a Refresh, and while the entry waits it is renewed
		// a third of its TTL after it was last known alive (at once for
		// an idle lease that has aged).
		var isNew bool
		e, isNew, _, err = d.entryFor(ctx, req.Owner, base, req.Mode, ttl)
		if err != nil {
			return driver.Lease{}, err
		}
		k = e.key
		wt.setKey(k)
		token, done, err := d.enqueue(ctx, req.Mode, req.Owner, base, k, e, isNew, wt)
		if err != nil {
			if attempt == 0 && errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseNotFound) {
				d.forget(req.Owner, k)
				k = ""
				continue // the lease ended: start over with a new one
			}
			return driver.Lease{}, err
		}
		if done {
			return d.granted(req, k, token)
		}
		break
	}

	// Wait for the older conflicting entries to go, renewing the lease.
	renew := time.NewTimer(d.renewDelay(req.Owner, k))
	defer renew.Stop()
	var ka *kaCall
	var kaDone <-chan struct{}
	// After the key's watch was re-created, the queue is read again; a
	// failed read is retried for as long as the entry's lease is known
	// to live, so that a leader election does not cost the waiter its
	// place.
	resync := false
	var retry <-chan time.Time
	delay := 10 * time.Millisecond
	for {
		select {
		case <-wt.signal:
		case <-retry:
			retry = nil
		case <-renew.C:
			ka = d.keepAlive(e.lease)
			kaDone = ka.done
			continue
		case <-kaDone:
			kaDone = nil
			switch {
			case ka.err != nil:
				if !d.known(req.Owner, k, time.Now()) {
					return driver.Lease{}, fmt.Errorf("renewing the queue entry: %w", ka.err)
				}
				renew.Reset(d.retryDelay(req.Owner, k))
			case ka.ttl <= 0:
				return driver.Lease{}, errEntryLost
			default:
				d.confirm(req.Owner, k, ka.sent, 0)
				renew.Reset(d.renewDelay(req.Owner, k))
			}
			continue
		case <-w.done:
			// The watch ended with the driver or its client.
			return driver.Lease{}, d.closedErr()
		case <-ctx.Done():
			return driver.Lease{}, ctx.Err()
		}
		gone, reset, token, granted := wt.state()
		if reset {
			resync = true
		}
		switch {
		case gone:
			return driver.Lease{}, errEntryLost
		case resync && retry == nil:
			var done bool
			token, done, err = d.enqueue(ctx, req.Mode, req.Owner, base, k, e, false, wt)
			switch {
			case errors.Is(err, errEntryLost):
				return driver.Lease{}, err
			case err != nil:
				if ctx.Err() != nil || !d.known(req.Owner, k, time.Now()) {
					return driver.Lease{}, err
				}
				retry = time.After(delay)
				delay = min(2*delay, time.Second)
				continue
			}
			resync, delay = false, 10*time.Millisecond
			if done {
				return d.granted(req, k, token)
			}
		case granted && !resync:
			d.setPred(req.Owner, k, wt.lastLeft())
			return d.granted(req, k, token)
		}
	}
}

// granted returns the lease of a granted entry, unless its lease may have
// run out meanwhile.
func (d *Driver) granted(req driver.Request, k string, token int64) (driver.Lease, error) {
	e, ok := d.lookup(req.Owner, k)
	if !ok || !time.Now().Before(e.deadline) {
		return driver.Lease{}, errEntryLost
	}
	d.confirm(req.Owner, k, time.Time{}, token)
	ttl := time.Duration(e.ttl) * time.Second
	l := driver.Lease{Key: req.Key, Owner: req.Owner, Mode: req.Mode, Token: uint64(token), TTL: ttl}
	if e.pred == "" {
		// The entry's lease is known to live until e.deadline: the
		// front-end may count from then on without a confirming
		// Refresh. (After a predecessor left, that Refresh checks how
		// it left: see Options.LockDelay.)
		l.Start = e.deadline.Add(-ttl)
	}
	return l, nil
}

// setPred records the sentinel of the holder whose leaving granted
// owner's entry k, for the first Refresh (see Options.LockDelay).
func (d *Driver) setPred(owner, k, sentinel string) {
	if d.lockDelay <= 0 {
		return
	}
	d.mu.Lock()
	if e := d.owners[owner]; e != nil && e.key == k {
		e.pred = sentinel
	}
	d.mu.Unlock()
}

// known reports whether owner's entry at k is known to live past now.
func (d *Driver) known(owner, k string, now time.Time) bool {
	e, ok := d.lookup(owner, k)
	return ok && now.Before(e.deadline)
}

// renewDelay is the time until owner's entry should be renewed: a third of
// its TTL after it was last confirmed.
func (d *Driver) renewDelay(owner, k string) time.Duration {
	e, ok := d.lookup(owner, k)
	if !ok {
		return 0
	}
	ttl := time.Duration(e.ttl) * time.Second
	return max(time.Until(e.deadline.Add(-ttl+ttl/3)), 0)
}

// retryDelay is the time until a failed renewal is tried again.
func (d *Driver) retryDelay(owner, k string) time.Duration {
	e, ok := d.lookup(owner, k)
	if !ok {
		return 0
	}
	return min(time.Duration(e.ttl)*time.Second/10, max(time.Until(e.deadline)/2, 10*time.Millisecond))
}

// enqueue puts (or keeps) k, the entry of mode m on lease e.lease, in the
// queue below base, in one transaction that also reads the older
// conflicting entries, and arms wt with them. done reports that none is
// left: the entry is granted with token.
func (d *Driver) enqueue(ctx context.Context, m driver.Mode, owner, base, k string, e entry, isNew bool, wt *waiter) (token int64, done bool, err error) {
	cs, ce := conflictRange(base, m)
	put := clientv3.OpPut(k, d.entryValue(owner), clientv3.WithLease(e.lease))
	all := clientv3.OpGet(cs, clientv3.WithRange(ce))
	var resp *clientv3.TxnResponse
	if isNew {
		// Known not to exist (see tryOnce): put it, and read the rest.
		resp, err = d.kv.Txn(ctx).If(freeCmp(cs, ce)).Then(put).Else(put, all).Commit()
	} else {
		isNewCmp := clientv3.Compare(clientv3.CreateRevision(k), "=", 0)
		resp, err = d.kv.Txn(ctx).If(isNewCmp, freeCmp(cs, ce)).Then(put).Else(
			clientv3.OpTxn([]clientv3.Cmp{isNewCmp}, []clientv3.Op{put}, nil),
			clientv3.OpGet(k),
			all,
		).Commit()
	}
	if err != nil {
		return 0, false, err
	}
	if resp.Succeeded {
		return resp.Header.Revision, true, nil
	}
	var own *mvccpb.KeyValue
	if isNew {
		own = &mvccpb.KeyValue{CreateRevision: resp.Header.Revision}
	} else if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 && isOwner(kvs[0].Value, owner) {
		own = kvs[0]
	} else {
		return 0, false, errEntryLost
	}
	allKvs := resp.Responses[len(resp.Responses)-1].GetResponseRange().Kvs
	var lower map[string]string
	for _, kv := range allKvs {
		if kv.CreateRevision < own.CreateRevision {
			if lower == nil {
				lower = make(map[string]string)
			}
			lower[string(kv.Key)] = entrySentinel(d.prefix, kv.Key, kv.Value)
		}
	}
	if len(lower) == 0 {
		return own.CreateRevision, true, nil
	}
	wt.arm(resp.Header.Revision, own.CreateRevision, lower)
	return own.CreateRevision, false, nil
}

// removeEntry deletes req.Owner's queue entry after a failed wait. If ctx
// is done, the entry is deleted in the background, within cleanupTimeout
// (or until the driver is closed), so that Acquire returns by ctx's
// deadline even when etcd does not answer.
func (d *Driver) removeEntry(ctx context.Context, req driver.Request, k string) {
	e := d.forget(req.Owner, k)
	remove := func(ctx context.Context) {
		resp, err := d.kv.Delete(ctx, k, clientv3.WithPrevKV())
		if err == nil && e != nil && len(resp.PrevKvs) > 0 && clientv3.LeaseID(resp.PrevKvs[0].Lease) == e.lease {
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
	d.spawn(func() {
		ctx, cancel := context.WithTimeout(d.ctx, cleanupTimeout)
		defer cancel()
		remove(ctx)
	})
}

// A waiter is Acquire's listener on the key's watch: it tracks the older
// conflicting entries that are still there, and its own entry.
type waiter struct {
	signal chan struct{} // poked on every change

	mu     sync.Mutex
	key    string // the waiter's own entry
	armed  bool
	rev    int64             // deletions at or before rev are already accounted for
	token  int64             // the own entry's create revision
	lower  map[string]string // older conflicting entries -> their leases' sentinels
	last   string            // the sentinel of the lower entry deleted last
	early  []delEvent        // deletions seen before arm
	gone   bool              // the own entry was deleted
	resets bool              // the watch was re-created since arm
}

type delEvent struct {
	key string
	rev int64
}

// setKey sets the waiter's own entry.
func (wt *waiter) setKey(k string) {
	wt.mu.Lock()
	wt.key = k
	wt.mu.Unlock()
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

// ended wakes the waiter, which sees the watch's end.
func (wt *waiter) ended() { wt.poke() }

func (wt *waiter) reset(int64) {
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
	if sentinel, ok := wt.lower[key]; ok {
		wt.last = sentinel
		delete(wt.lower, key)
	}
}

// arm starts tracking lower, the older conflicting entries seen at
// revision rev by the entry with create revision token.
func (wt *waiter) arm(rev, token int64, lower map[string]string) {
	wt.mu.Lock()
	wt.armed, wt.rev, wt.token, wt.lower, wt.resets = true, rev, token, lower, false
	for _, ev := range wt.early {
		wt.apply(ev.key, ev.rev)
	}
	wt.early = nil
	wt.mu.Unlock()
	wt.poke()
}

// state reports the waiter's state: its own entry is gone, the watch was
// re-created, or no older conflicting entry is left (with the entry's
// token).
func (wt *waiter) state() (gone, reset bool, token int64, granted bool) {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	if wt.resets {
		wt.resets = false
		wt.armed = false
		return wt.gone, true, 0, false
	}
	return wt.gone, false, wt.token, wt.armed && len(wt.lower) == 0
}

// lastLeft returns the sentinel of the older entry whose deletion
// granted the waiter.
func (wt *waiter) lastLeft() string {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	return wt.last
}
