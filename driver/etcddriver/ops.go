package etcddriver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// errNoEntry answers a call for an owner of whom this driver made no
// entry: a lease is used only through the Driver that granted it.
var errNoEntry = fmt.Errorf("no entry of the owner made by this driver: %w", driver.ErrNotHeld)

// TryAcquire implements driver.Driver in one transaction (see docs/etcddriver.md).
func (d *Driver) TryAcquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	bctx, ttl := d.request(ctx), int64(req.TTL/time.Second) // whole seconds (Capabilities)
	var l driver.Lease
	err := d.begin(bctx)
	if err == nil {
		var retry bool
		if l, retry, err = d.tryOnce(bctx, req, ttl); retry {
			l, _, err = d.tryOnce(bctx, req, ttl)
		}
	}
	if err == nil {
		err = d.closedErr() // closed while the request was under way
	}
	if err != nil {
		return driver.Lease{}, d.errs.Wrap(ctx, "acquire", req.Key, err)
	}
	return l, nil
}

// entryFor returns req.Owner's entry below base, or a new one, remembered
// before it is put, on a lease of ttl seconds from the pool or granted now
// (fresh: it needs no keep-alive to prove its life).
func (d *Driver) entryFor(ctx context.Context, req driver.Request, base string, ttl int64) (e entry, isNew, fresh bool, err error) {
	if e, ok := d.entryOf(req.Owner, base, req.Mode); ok {
		return e, false, false, nil
	}
	id, deadline, fresh, err := d.takeLease(ctx, ttl)
	if err != nil {
		return entry{}, false, false, err
	}
	e = entry{key: entryKey(base, reqDir(req), id), base: base, mode: req.Mode, lease: id, ttl: ttl, deadline: deadline}
	d.remember(req.Owner, e)
	return e, true, fresh, nil
}

// An attempt is the outcome of one acquiring transaction.
type attempt struct {
	granted bool
	token   int64 // the entry's create revision, when it has one
	kept    bool  // req.Owner has an entry after the transaction
	created bool  // the transaction put it
	refusal error // when not granted: a *driver.LockedError or an error wrapping a *driver.LimitError

	own  *mvccpb.KeyValue   // when not granted: req.Owner's entry, if kept
	rev  int64              // the transaction's revision
	read []*mvccpb.KeyValue // when not granted: the entries read (see put)
}

// tryOnce makes one attempt. retry reports that it failed because the
// lease had vanished, so that an attempt with a new lease may succeed.
func (d *Driver) tryOnce(ctx context.Context, req driver.Request, ttl int64) (_ driver.Lease, retry bool, _ error) {
	e, isNew, fresh, err := d.entryFor(ctx, req, d.base(req.Key), ttl)
	if err != nil {
		return driver.Lease{}, false, err
	}
	// The keep-alive goes out with the transaction: it proves that an idle
	// lease lives ttl from now, or renews the owner's entry.
	var ka *kaCall
	proved := isNew && !fresh && time.Until(e.deadline) >= time.Duration(ttl)*time.Second-provedWindow(ttl)
	if !fresh && !proved {
		ka = d.keepAlive(e.lease)
	}
	all := reqDir(req) == counted
	a, err := d.put(ctx, req, e, isNew, req.Queued || all, all)
	if err == nil {
		err = d.withdraw(ctx, req.Owner, e.key, &a, req.Queued)
	}
	if err != nil {
		if errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseNotFound) {
			// The lease ended, and any entry on it: start anew.
			d.forget(req.Owner, e.key)
			return driver.Lease{}, true, err
		}
		return driver.Lease{}, false, err
	}
	l, err := d.settle(ctx, req, e, ka, proved, ttl, a)
	return l, false, err
}

// put is the transaction of an attempt to grant e, the entry of req:
// If(no conflicting entry) Then(put e). Otherwise it puts e all the same
// when always (a counted entry, whose grant no comparison decides, or one
// that queues), reads e unless it is new (isNew: its key is that of an
// idle lease of the driver's), and reads the conflicting entries: all of
// them when all (which implies always); else the oldest one, or for a new
// reader the oldest counted one (whose limit it may disagree with), and
// nothing for a new writer, which is refused whoever is in the way.
func (d *Driver) put(ctx context.Context, req driver.Request, e entry, isNew, always, all bool) (attempt, error) {
	k, dir, v := e.key, keyDir(e.key), d.entryValue(req)
	cs, ce := conflictRange(e.base, dir)
	put := clientv3.OpPut(k, v, clientv3.WithLease(e.lease))
	conds := []clientv3.Cmp{freeCmp(cs, ce)}
	var els []clientv3.Op
	switch {
	case isNew && always:
		els = append(els, put)
	case !isNew:
		isNewCmp := clientv3.Compare(clientv3.CreateRevision(k), "=", 0)
		conds = append(conds, isNewCmp)
		if always {
			els = append(els, clientv3.OpTxn([]clientv3.Cmp{isNewCmp}, []clientv3.Op{put}, nil))
		}
		els = append(els, clientv3.OpGet(k))
	}
	switch {
	case all:
		els = append(els, clientv3.OpGet(cs, clientv3.WithRange(ce)))
	case !isNew:
		els = append(els, firstOp(cs, ce, dir == writers))
	case dir == readers:
		els = append(els, firstOp(e.base+counted, clientv3.GetPrefixRangeEnd(e.base+counted), false))
	}
	resp, err := d.kv.Txn(ctx).If(conds...).Then(put).Else(els...).Commit()
	if err != nil {
		return attempt{}, err
	}
	a := attempt{rev: resp.Header.Revision, created: true}
	if resp.Succeeded {
		a.granted, a.token, a.kept = true, a.rev, true
		return a, nil
	}
	a.refusal, a.created = &driver.LockedError{}, isNew && always
	rs := resp.Responses
	if len(rs) > 0 {
		a.read = rs[len(rs)-1].GetResponseRange().GetKvs()
	}
	switch {
	case isNew && !all:
		a.kept, a.token = always, a.rev
		if dir == readers && len(a.read) > 0 {
			a.refusal = mismatch(class{dir: readers}, classOf(a.read[0]))
		}
		return a, nil
	case isNew:
		a.own = &mvccpb.KeyValue{Key: []byte(k), Value: []byte(v), CreateRevision: a.rev}
	default:
		a.created = always && rs[0].GetResponseTxn().Succeeded
		if kvs := rs[len(rs)-2].GetResponseRange().Kvs; len(kvs) > 0 && isOwner(kvs[0].Value, req.Owner) {
			a.own = kvs[0]
		}
	}
	if a.own == nil {
		return a, nil
	}
	a.kept, a.token = true, a.own.CreateRevision
	ok, lerr := admit(classOf(a.own), a.token, a.read)
	a.granted = ok && lerr == nil
	if lerr != nil {
		a.refusal = lerr
	}
	return a, nil
}

// withdraw deletes the entry that a refused attempt put, unless it queues
// (and its limit agrees with the older entries').
func (d *Driver) withdraw(ctx context.Context, owner, k string, a *attempt, queued bool) error {
	if a.granted || !a.created {
		return nil
	}
	var lerr *driver.LimitError
	if queued && !errors.As(a.refusal, &lerr) {
		return nil
	}
	if _, err := d.kv.Delete(ctx, k); err != nil {
		d.unsure(owner, k) // the front-end's Release removes it, by the record
		return err
	}
	a.kept = false
	return nil
}

// settle completes an attempt a on entry e: a refused attempt that left no
// entry returns e's lease to the pool; otherwise ka, when sent, must
// confirm the lease first.
func (d *Driver) settle(ctx context.Context, req driver.Request, e entry, ka *kaCall, proved bool, ttl int64, a attempt) (driver.Lease, error) {
	k := e.key
	if !a.kept {
		d.dropEntry(req.Owner, k, e, ka)
		return driver.Lease{}, a.refusal
	}
	// req.Owner has an entry: its lease must live ttl from the call on.
	if ka != nil {
		left, err := ka.result(ctx)
		if err != nil {
			return driver.Lease{}, err
		}
		if left <= 0 {
			d.forget(req.Owner, k)
			return driver.Lease{}, errEntryLost
		}
		ttl = left
		d.confirm(req.Owner, k, ka.sent, 0)
	}
	if !a.granted {
		return driver.Lease{}, a.refusal
	}
	d.confirm(req.Owner, k, time.Time{}, a.token) // the token, for Cmp and a Release with Abandoned
	l := driver.Lease{Key: req.Key, Owner: req.Owner, Mode: req.Mode, Token: uint64(a.token), TTL: time.Duration(ttl) * time.Second}
	if proved {
		l.Start = e.deadline.Add(-l.TTL)
	}
	return l, nil
}

// provedWindow is how old the last proof of an idle lease may be for an
// acquire to use it without another keep-alive: a tenth of the TTL, so
// that the hold's first renewal is still almost a third of the TTL away.
// It saves the keep-alive of every uncontended pair in a loop
// (2 requests per pair instead of 3: TestRoundTrips).
func provedWindow(ttl int64) time.Duration { return time.Duration(ttl) * time.Second / 10 }

// dropEntry forgets an entry that a refused TryAcquire did not put, and
// returns its lease to the pool when the lease was taken for it.
func (d *Driver) dropEntry(owner, k string, e entry, ka *kaCall) {
	d.forget(owner, k)
	deadline := e.deadline
	if ka != nil {
		select {
		case <-ka.done:
			if ka.err != nil || ka.ttl <= 0 {
				return
			}
			deadline = ka.sent.Add(time.Duration(ka.ttl) * time.Second)
		default: // no wait: the lease lives until e.deadline anyway
		}
	}
	d.putLease(e.lease, e.ttl, deadline)
}

// firstOp returns the Get of the oldest entry in [start, end), without
// its value when keysOnly.
func firstOp(start, end string, keysOnly bool) clientv3.Op {
	opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1)}
	if keysOnly {
		opts = append(opts, clientv3.WithKeysOnly())
	}
	return clientv3.OpGet(start, opts...)
}

// freeCmp holds when [start, end) has no key.
func freeCmp(start, end string) clientv3.Cmp {
	return clientv3.Compare(clientv3.Version(start), "=", 0).WithRange(end)
}

// Refresh implements driver.Driver: one linearizable Get of l's entry,
// with a keep-alive of its lease alongside (see checkHeld).
func (d *Driver) Refresh(ctx context.Context, l driver.Lease) (driver.Lease, error) {
	bctx := d.request(ctx)
	err := d.refresh(bctx, l)
	if err == nil {
		err = d.closedErr()
	}
	if err != nil {
		return driver.Lease{}, d.errs.Wrap(ctx, "refresh", l.Key, err)
	}
	return l, nil
}

func (d *Driver) refresh(ctx context.Context, l driver.Lease) error {
	if err := d.begin(ctx); err != nil {
		return err
	}
	e, known := d.entryOf(l.Owner, d.base(l.Key), l.Mode)
	if !known {
		return errNoEntry
	}
	ka := d.keepAlive(e.lease)
	resp, err := d.kv.Get(ctx, e.key)
	if err != nil {
		return err
	}
	var own *mvccpb.KeyValue
	if len(resp.Kvs) > 0 {
		own = resp.Kvs[0]
	}
	return d.checkHeld(ctx, l, e, own, ka)
}

// checkHeld completes a refresh of l, whose entry e was read as own: it
// fails with ErrNotHeld unless own is l.Owner's with l's token, and waits
// for ka.
func (d *Driver) checkHeld(ctx context.Context, l driver.Lease, e entry, own *mvccpb.KeyValue, ka *kaCall) error {
	token := int64(l.Token)
	if own == nil || !isOwner(own.Value, l.Owner) {
		d.forget(l.Owner, e.key)
		return fmt.Errorf("no entry of the owner: %w", driver.ErrNotHeld)
	}
	if token == 0 || own.CreateRevision != token {
		return fmt.Errorf("no entry of the owner with token %d: %w", l.Token, driver.ErrNotHeld)
	}
	left, err := ka.result(ctx)
	if err != nil {
		return err
	}
	if left <= 0 {
		d.forget(l.Owner, e.key)
		return fmt.Errorf("lease %x expired or revoked: %w", own.Lease, driver.ErrNotHeld)
	}
	d.confirm(l.Owner, e.key, ka.sent, own.CreateRevision)
	return nil
}

// maxBatchOps bounds the reads per transaction of RefreshBatch, below
// etcd's default --max-txn-ops of 128.
const maxBatchOps = 100

// RefreshBatch implements driver.BatchRefresher (see docs/etcddriver.md).
func (d *Driver) RefreshBatch(ctx context.Context, ls []driver.Lease) []error {
	bctx := d.request(ctx)
	errs := d.refreshBatch(bctx, ls)
	for i, err := range errs {
		errs[i] = d.errs.Wrap(ctx, "refresh", ls[i].Key, err)
	}
	return errs
}

// refreshBatch is RefreshBatch, without naming the errors.
func (d *Driver) refreshBatch(ctx context.Context, ls []driver.Lease) []error {
	errs := make([]error, len(ls))
	if len(ls) == 0 {
		return errs
	}
	if err := d.begin(ctx); err != nil {
		for i := range ls {
			errs[i] = err
		}
		return errs
	}
	es, kas, owns := make([]entry, len(ls)), make([]*kaCall, len(ls)), make([]*mvccpb.KeyValue, len(ls))
	var known []int
	for i, l := range ls {
		e, ok := d.entryOf(l.Owner, d.base(l.Key), l.Mode)
		if !ok {
			errs[i] = errNoEntry
			continue
		}
		es[i], kas[i] = e, d.keepAlive(e.lease)
		known = append(known, i)
	}
	var wg sync.WaitGroup
	for lo, hi := range driverkit.Chunks(len(known), maxBatchOps, nil) {
		wg.Go(func() {
			idx := known[lo:hi]
			ops := make([]clientv3.Op, len(idx))
			for j, i := range idx {
				ops[j] = clientv3.OpGet(es[i].key)
			}
			resp, err := d.kv.Txn(ctx).Then(ops...).Commit()
			for j, i := range idx {
				if err != nil {
					errs[i] = err
				} else if kvs := resp.Responses[j].GetResponseRange().Kvs; len(kvs) > 0 {
					owns[i] = kvs[0]
				}
			}
		})
	}
	wg.Wait()
	for i, l := range ls {
		if errs[i] == nil {
			errs[i] = d.checkHeld(ctx, l, es[i], owns[i], kas[i])
		}
	}
	return errs
}

// Release implements driver.Driver: one Delete of l's entry. It returns an
// error wrapping driver.ErrNotHeld when the entry was not there or had
// another create revision than l.Token, or, with l.Abandoned (the removal
// of a queue entry, or of a grant whose reply was lost), when this driver
// had not granted it; the entry is gone either way, and its lease goes
// back to the pool. Without l.Abandoned, a Token 0 is no grant's: the
// Release fails with ErrNotHeld and removes nothing. Until the Delete
// succeeds the driver keeps its record of the entry, for a retry.
func (d *Driver) Release(ctx context.Context, l driver.Lease) error {
	bctx := d.request(ctx)
	return d.errs.Wrap(ctx, "release", l.Key, d.release(bctx, l))
}

func (d *Driver) release(ctx context.Context, l driver.Lease) error {
	if err := d.begin(ctx); err != nil {
		return err
	}
	if l.Token == 0 && !l.Abandoned {
		return fmt.Errorf("token 0: %w", driver.ErrNotHeld)
	}
	e, known := d.entryOf(l.Owner, d.base(l.Key), l.Mode)
	if !known {
		return errNoEntry
	}
	d.stopLosses(e.lease, "")
	rc := d.startRelease(e.base, e.key)
	resp, err := d.kv.Delete(ctx, e.key, clientv3.WithPrevKV())
	rc.end(resp, err)
	if err != nil {
		// The entry may still be there: the record stays, for a retry.
		d.unsure(l.Owner, e.key)
		return err
	}
	f, ok := d.forget(l.Owner, e.key)
	if len(resp.PrevKvs) == 0 {
		return fmt.Errorf("no entry: %w", driver.ErrNotHeld)
	}
	if ok && !f.unsure {
		d.putLease(e.lease, e.ttl, e.deadline)
	}
	switch prev := resp.PrevKvs[0]; {
	case !l.Abandoned && prev.CreateRevision != int64(l.Token):
		return fmt.Errorf("the entry has token %d, not %d (removed anyway): %w", prev.CreateRevision, l.Token, driver.ErrNotHeld)
	case l.Abandoned && e.token != prev.CreateRevision:
		return fmt.Errorf("the entry was not granted (removed): %w", driver.ErrNotHeld)
	}
	return nil
}

// A releaseCall is a Release's Delete of an entry, which this driver's
// waiters on the same key look at (see queueWait.afterPred): a deletion
// that the Delete made is a release, not the end of a lease, and needs no
// read of the holder's sentinel. That read is what this record saves on
// every handoff within one driver (TestHandoffRoundTrips: 2.00 requests
// per acquisition with one driver, 2.89 across four).
type releaseCall struct {
	done chan struct{}
	rev  int64 // after done: the revision at which the Delete deleted the entry, or 0
}

const (
	maxReleases      = 1024        // bounds the Delete calls remembered
	releaseReplyWait = time.Second // bounds releasedAt's wait for a reply
)

// startRelease records a Release's Delete of entry k of the lock at base,
// about to be sent, when the driver watches that lock (only its waiters
// look), and returns nil otherwise.
func (d *Driver) startRelease(base, k string) *releaseCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.watches[base] == nil {
		return nil
	}
	rc := &releaseCall{done: make(chan struct{})}
	d.releases.Put(k, rc)
	return rc
}

// end records the reply to the Delete; rc may be nil.
func (rc *releaseCall) end(resp *clientv3.DeleteResponse, err error) {
	if rc == nil {
		return
	}
	if err == nil && resp.Deleted > 0 {
		rc.rev = resp.Header.Revision
	}
	close(rc.done)
}

// releasedAt reports whether this driver's Release deleted entry k at
// revision rev. The waiter calls it having seen the deletion, so the reply
// to a Delete still under way is on its way too: it is waited for, up to
// releaseReplyWait (then the answer is unknown: false).
func (d *Driver) releasedAt(ctx context.Context, k string, rev int64) bool {
	d.mu.Lock()
	rc, ok := d.releases.Get(k)
	d.mu.Unlock()
	if !ok {
		return false
	}
	t := time.NewTimer(releaseReplyWait)
	defer t.Stop()
	select {
	case <-rc.done:
		return rc.rev == rev
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}
