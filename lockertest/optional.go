package lockertest

import (
	"errors"
	"time"

	"github.com/go-locker/locker/driver"
)

// notifyWait bounds how long a notification may take to arrive.
const notifyWait = 2 * time.Second

// testShared checks Mode Shared: readers coexist and exclude writers, each
// grant has its own token, and each reader's lease expires on its own.
func testShared(e *env) {
	e.skipUnlessShared()
	ds := e.drivers(3)
	key := e.key("k")

	r1 := req(key, driver.Shared, e.long)
	l1, s1 := e.acquire(ds[0], r1)
	r2 := req(key, driver.Shared, e.long)
	l2, s2 := e.acquire(ds[1], r2)
	if l2.Token <= l1.Token {
		e.t.Errorf("second shared grant has token %d after the first's %d; want strictly increasing tokens", l2.Token, l1.Token)
	}
	if l, _ := e.acquire(ds[0], r1); l.Token != l1.Token {
		e.t.Errorf("shared re-acquire by the holder returned token %d; want %d", l.Token, l1.Token)
	}
	e.expectLocked(ds[2], key, driver.Exclusive, s1, validTTL(r1, l1))
	e.refresh(ds[0], l1)

	// One reader left: writers still wait.
	e.release(ds[0], l1)
	e.expectLocked(ds[2], key, driver.Exclusive, s2, validTTL(r2, l2))
	e.refreshNotHeld("Refresh of a released shared lease", ds[0], l1)
	e.releaseNotHeld("second Release of a shared lease", ds[0], l1)
	bad := l2
	bad.Owner = newOwner()
	e.releaseNotHeld("Release of a shared lease by a non-owner", ds[2], bad)
	e.expectLocked(ds[2], key, driver.Exclusive, s2, validTTL(r2, l2))
	e.release(ds[1], l2)

	// A writer excludes readers.
	rw := req(key, driver.Exclusive, e.long)
	lw, sw := e.acquire(ds[2], rw)
	if lw.Token <= l2.Token {
		e.t.Errorf("exclusive grant after shared ones has token %d after %d; want strictly increasing tokens", lw.Token, l2.Token)
	}
	e.expectLocked(ds[0], key, driver.Shared, sw, validTTL(rw, lw))
	e.release(ds[2], lw)

	// Many readers, each with its own increasing token.
	var readers []driver.Lease
	last := lw.Token
	for i := range 5 {
		l, _ := e.acquire(ds[i%len(ds)], req(key, driver.Shared, e.long))
		if l.Token <= last {
			e.t.Errorf("shared grant %d has token %d after %d; want strictly increasing tokens", i, l.Token, last)
		}
		last = l.Token
		readers = append(readers, l)
	}
	for i, l := range readers {
		e.release(ds[i%len(ds)], l)
	}
	e.expectFree(ds[0], key, driver.Exclusive, "after all readers released")

	testSharedExpiry(e, ds)
}

// testSharedExpiry checks that a reader that stops refreshing expires
// while another reader keeps refreshing.
func testSharedExpiry(e *env, ds []driver.Driver) {
	key := e.key("expiry")
	rs := req(key, driver.Shared, e.short)
	ls, _ := e.acquire(ds[0], rs)
	expired := time.Now().Add(2*grantedTTL(rs, ls) + 100*time.Millisecond)
	rm := req(key, driver.Shared, e.medium)
	lm, last := e.acquire(ds[1], rm)
	ttl := validTTL(rm, lm)
	for time.Now().Before(expired) {
		if !e.sleep(ttl / 4) {
			return
		}
		s := time.Now()
		if _, err := ds[1].Refresh(e.ctx, lm); err != nil {
			if !withinLease(last, ttl) {
				e.inconclusive("a refresh was not confirmed before the lease could have expired")
			}
			e.t.Fatalf("Refresh(%s) of a shared lease: %v", fmtLease(lm), err)
		}
		last = s
	}
	e.refreshNotHeld("Refresh of an expired shared lease while another reader refreshed its own", ds[0], ls)
	e.expectLocked(ds[2], key, driver.Exclusive, last, ttl)
	if !withinLease(last, ttl) {
		e.inconclusive("the refreshing reader's lease could have expired")
	}
	e.release(ds[1], lm)
	e.expectFree(ds[2], key, driver.Exclusive, "after the refreshing reader released while the other reader's lease had expired")
}

// testNotify checks that subscribers hear of releases by any client of
// holds that refused a TryAcquire after they subscribed, which is how the
// front-end waits (a driver may skip notifying the release of a hold that
// refused nobody).
func testNotify(e *env) {
	e.skipUnless(e.caps.Notify, "Notify")
	n := claimed[driver.Notifier](e, e.d)
	ds := e.drivers(2)
	key := e.key("k")
	subscribe := func(key string) driver.Subscription {
		e.t.Helper()
		sub, err := n.Subscribe(e.ctx, key)
		if err != nil {
			e.t.Fatalf("Subscribe(%q): %v", key, err)
		}
		e.t.Cleanup(func() { sub.Close() })
		return sub
	}
	// A hold of key through d refuses a TryAcquire by the other client
	// and is released; then wait for subs.
	notify := func(d driver.Driver, key, what string, subs ...driver.Subscription) {
		e.t.Helper()
		for _, sub := range subs {
			drain(sub)
		}
		l, sent := e.acquire(d, req(key, driver.Exclusive, e.long))
		refused := ds[0]
		if d == ds[0] {
			refused = ds[1]
		}
		e.expectLocked(refused, key, driver.Exclusive, sent, e.long)
		e.release(d, l)
		for i, sub := range subs {
			select {
			case <-sub.C():
			case <-time.After(notifyWait):
				e.t.Fatalf("subscription %d to %q: no notification within %v of a release by %s", i, key, notifyWait, what)
			case <-e.ctx.Done():
				return
			}
		}
	}
	sub1 := subscribe(key)
	sub2 := subscribe(key)
	other := subscribe(e.key("other"))
	notify(ds[1], key, "another client", sub1, sub2)
	notify(ds[0], key, "the subscribing client", sub1, sub2)

	// Closing one subscription leaves the others working.
	if err := sub2.Close(); err != nil {
		e.t.Errorf("Subscription.Close: %v", err)
	}
	notify(ds[1], key, "another client after a second subscription to the key was closed", sub1)
	notify(ds[1], e.key("other"), "another client", other)

	// Hostile keys work too.
	weird := e.key("{*}?[a]/../ключ\t%")
	notify(ds[1], weird, "another client", subscribe(weird))
}

// drain empties sub's channel of notifications already sent.
func drain(sub driver.Subscription) {
	for {
		select {
		case <-sub.C():
		default:
			return
		}
	}
}

// expectQueuedLocked checks that a queued TryAcquire of r through q is
// refused with ErrLocked; why says why it must be.
func (e *env) expectQueuedLocked(q driver.Driver, r driver.Request, why string) {
	e.t.Helper()
	l, err := tryQueued(e.ctx, q, r)
	if err == nil {
		e.t.Errorf("queued TryAcquire(%s) succeeded %s", fmtReq(r), why)
		e.release(q, l)
		return
	}
	e.checkLocked(r, err, e.long)
}

// expectTryLocked checks that a plain TryAcquire of r through d is
// refused with ErrLocked; why says why it must be.
func (e *env) expectTryLocked(d driver.Driver, r driver.Request, why string) {
	e.t.Helper()
	l, err := d.TryAcquire(e.ctx, r)
	if err == nil {
		e.t.Errorf("TryAcquire(%s) succeeded %s", fmtReq(r), why)
		e.release(d, l)
		return
	}
	e.checkLocked(r, err, e.long)
}

// leaveQueue removes the queue entry of r, an owner that does not hold
// its key, checking that the Release reports ErrNotHeld.
func (e *env) leaveQueue(d driver.Driver, r driver.Request) {
	e.t.Helper()
	e.releaseNotHeld("Release by a queued owner that does not hold the key", d, driver.Lease{Key: r.Key, Owner: r.Owner, Mode: r.Mode, Abandoned: true})
}

// testQueue checks Capabilities.Queue (Request.Queued): queued owners are served in order, before
// newcomers; leaving the queue unblocks the others; entries expire.
func testQueue(e *env) {
	e.skipUnless(e.caps.Queue, "Queue")
	ds := e.drivers(3)
	qs := ds
	key := e.key("fifo")
	queued, locked, leave := e.expectQueuedLocked, e.expectTryLocked, e.leaveQueue

	// A free key with an empty queue is granted at once.
	la, _ := e.acquireQueued(qs[0], req(key, driver.Exclusive, e.long))

	// B, then C, queue up; B's second call renews its entry.
	b := req(key, driver.Exclusive, e.long)
	c := req(key, driver.Exclusive, e.long)
	queued(qs[1], b, "while another owner holds the key")
	queued(qs[1], b, "while another owner holds the key")
	queued(qs[2], c, "while another owner holds the key")
	e.release(ds[0], la)

	// B is at the head: neither a newcomer nor C may overtake it.
	locked(ds[0], req(key, driver.Exclusive, e.long), "for a newcomer while a queued owner waits")
	queued(qs[2], c, "for the second queued owner, ahead of the first")
	lb, _ := e.acquireQueued(qs[1], b)
	if lb.Token <= la.Token {
		e.t.Errorf("queued grant has token %d after %d; want strictly increasing tokens", lb.Token, la.Token)
	}

	// D queues behind C; C leaves; when B releases, D is the head.
	dr := req(key, driver.Exclusive, e.long)
	queued(qs[0], dr, "while another owner holds the key")
	leave(ds[2], c)
	e.release(ds[1], lb)
	ld, _ := e.acquireQueued(qs[0], dr) // fails if C's or a second entry of B's remained
	e.release(ds[0], ld)
	e.expectFree(ds[1], key, driver.Exclusive, "after every queued owner was served or left")

	// The head may also take the key with a plain TryAcquire.
	le, _ := e.acquire(ds[0], req(key, driver.Exclusive, e.long))
	f := req(key, driver.Exclusive, e.long)
	queued(qs[1], f, "while another owner holds the key")
	e.release(ds[0], le)
	lf, _ := e.acquire(ds[1], f)
	e.release(ds[1], lf)

	// An entry that is not renewed expires.
	key2 := e.key("expiry")
	lg, _ := e.acquire(ds[0], req(key2, driver.Exclusive, e.long))
	h := req(key2, driver.Exclusive, e.short)
	sentH := time.Now()
	queued(qs[1], h, "while another owner holds the key")
	confirmedH := time.Now()
	e.release(ds[0], lg)
	if err := e.expectLocked(ds[2], key2, driver.Exclusive, sentH, h.TTL); err == nil {
		return
	}
	lx, _, ok := e.acquireAfterExpiry(ds[2], req(key2, driver.Exclusive, e.long), h, driver.Lease{TTL: h.TTL}, sentH, confirmedH)
	if ok {
		e.release(ds[2], lx)
	}

	if e.sharer() {
		testQueueShared(e, ds, qs)
	}
}

// testQueueShared checks that a run of shared owners at the head of the
// queue is served together, and that a queued writer holds back newcomers.
func testQueueShared(e *env, ds []driver.Driver, qs []driver.Driver) {
	key := e.key("shared")
	queued := e.expectQueuedLocked
	lw1, _ := e.acquire(ds[0], req(key, driver.Exclusive, e.long))
	r1 := req(key, driver.Shared, e.long)
	r2 := req(key, driver.Shared, e.long)
	w2 := req(key, driver.Exclusive, e.long)
	r3 := req(key, driver.Shared, e.long)
	queued(qs[1], r1, "while a writer holds the key")
	queued(qs[2], r2, "while a writer holds the key")
	queued(qs[0], w2, "while a writer holds the key")
	queued(qs[1], r3, "while a writer holds the key")
	e.release(ds[0], lw1)

	l1, _ := e.acquireQueued(qs[1], r1)
	l2, _ := e.acquireQueued(qs[2], r2)
	queued(qs[1], r3, "for a reader queued behind a writer")
	l4, err := ds[2].TryAcquire(e.ctx, req(key, driver.Shared, e.long))
	if err == nil {
		e.t.Errorf("a new reader was granted the key while readers held it and a writer was queued; want it to wait behind the writer")
		e.release(ds[2], l4)
	}
	queued(qs[0], w2, "for a writer while readers hold the key")
	e.release(ds[1], l1)
	e.release(ds[2], l2)
	lw2, _ := e.acquireQueued(qs[0], w2)
	queued(qs[1], r3, "for a reader while a writer holds the key")
	e.release(ds[0], lw2)
	l3, _ := e.acquireQueued(qs[1], r3)
	e.release(ds[1], l3)
}

// errNilOrNotHeld is testBatchRefresh's answer for another driver's lease.
var errNilOrNotHeld = errors.New("nil or ErrNotHeld")

// testBatchRefresh checks that RefreshBatch refreshes each lease as Refresh
// would and reports per lease.
func testBatchRefresh(e *env) {
	e.skipUnless(e.caps.RefreshBatch, "RefreshBatch")
	br := claimed[driver.BatchRefresher](e, e.d)
	ds := e.drivers(2)

	if errs := br.RefreshBatch(e.ctx, nil); len(errs) != 0 {
		e.t.Errorf("RefreshBatch(nil) = %v; want no errors", errs)
	}

	rHeld := req(e.key("held"), driver.Exclusive, e.medium)
	held, sent := e.acquire(ds[0], rHeld)
	after := time.Now()
	mode := driver.Exclusive
	if e.sharer() {
		mode = driver.Shared
	}
	rHeld2 := req(e.key("held2"), mode, e.medium)
	held2, _ := e.acquire(ds[0], rHeld2)
	released, _ := e.acquire(ds[0], req(e.key("released"), driver.Exclusive, e.long))
	e.release(ds[0], released)
	// Another driver's lease: the front-end never renews it through this
	// driver, which may refuse it or renew it, but must leave it held.
	foreign, sentForeign := e.acquire(ds[1], req(e.key("foreign"), driver.Exclusive, e.long))
	wrongOwner := foreign
	wrongOwner.Owner = newOwner()
	never := driver.Lease{Key: e.key("never"), Owner: newOwner(), Mode: driver.Exclusive, Token: 1, TTL: e.long}

	ls := []driver.Lease{held, released, wrongOwner, never, held2, foreign}
	want := []error{nil, driver.ErrNotHeld, driver.ErrNotHeld, driver.ErrNotHeld, nil, errNilOrNotHeld}
	e.sleepUntil(sent.Add(e.medium / 2))
	sentBatch := time.Now()
	errs := br.RefreshBatch(e.ctx, ls)
	if !withinLease(sent, validTTL(rHeld, held)) {
		e.inconclusive("the batch refresh was not confirmed before the leases could have expired")
	}
	if len(errs) != len(ls) {
		e.t.Fatalf("RefreshBatch of %d leases returned %d errors: %v", len(ls), len(errs), errs)
	}
	for i, err := range errs {
		switch {
		case want[i] == errNilOrNotHeld:
			if err != nil && !errors.Is(err, driver.ErrNotHeld) {
				e.t.Errorf("RefreshBatch: another driver's lease %d %s: %v; want nil or an error wrapping %v", i, fmtLease(ls[i]), err, driver.ErrNotHeld)
			}
		case want[i] == nil && err != nil:
			e.t.Errorf("RefreshBatch: lease %d %s: %v; want nil", i, fmtLease(ls[i]), err)
		case want[i] != nil && !errors.Is(err, want[i]):
			e.t.Errorf("RefreshBatch: lease %d %s: %v; want an error wrapping %v", i, fmtLease(ls[i]), err, want[i])
		}
	}
	e.expectLocked(ds[0], foreign.Key, driver.Exclusive, sentForeign, foreign.TTL)
	// Released now: with a single TTL (MinTTL equal to MaxTTL)
	// it would not outlast the wait below.
	e.release(ds[1], foreign)
	e.expectFree(ds[0], released.Key, driver.Exclusive, "after RefreshBatch of a released lease")
	e.expectFree(ds[0], never.Key, driver.Exclusive, "after RefreshBatch of a lease never granted")

	// The held leases were extended from the batch on.
	e.sleepUntil(after.Add(grantedTTL(rHeld, held) + e.medium/8))
	for _, l := range []driver.Lease{held, held2} {
		if err := e.expectLocked(ds[0], l.Key, driver.Exclusive, sentBatch, validTTL(rHeld, l)); err == nil {
			return
		}
	}
	// The batch extended them only to sentBatch + TTL: on a loaded
	// machine the checks above can take until then.
	e.releaseAfterChecks(ds[0], held, sentBatch, validTTL(rHeld, held))
	e.releaseAfterChecks(ds[0], held2, sentBatch, validTTL(rHeld2, held2))
}

// testCapabilities checks that the driver's Capabilities are consistent:
// every optional interface they report is implemented, counted requests
// come with Shared mode, values with Inspect, and the flags do not change. An interface that is
// implemented but not reported is only logged: a driver that wraps others
// implements every method and reports which ones work.
func testCapabilities(e *env) {
	c := e.caps
	e.t.Logf("driver %T: Capabilities %+v", e.d, c)
	if c.Counted && !c.Shared {
		e.t.Errorf("Capabilities report Counted without Shared: counted requests are Shared ones")
	}
	if c.Values && !c.Inspect {
		e.t.Errorf("Capabilities report Values without Inspect: nobody could read the values")
	}
	// The flags do not change: not on a second call, not on another
	// client (the TTL limits may, as a negotiated limit does).
	flags := func(c driver.Capabilities) driver.Capabilities {
		c.MinTTL, c.MaxTTL = 0, 0
		return c
	}
	for i, d := range []driver.Driver{e.d, e.driver()} {
		if got := driver.CapabilitiesOf(d); flags(got) != flags(c) {
			e.t.Errorf("Capabilities of driver %d = %+v, after %+v; want the same flags", i, got, c)
		}
	}
	_ = claimed[driver.Notifier](e, e.d)
	_ = claimed[driver.Acquirer](e, e.d)
	_ = claimed[driver.LossWatcher](e, e.d)
	_ = claimed[driver.BatchRefresher](e, e.d)
	_ = claimed[driver.Inspector](e, e.d)
	unreported := func(implemented, reported bool, iface, flag string) {
		if implemented && !reported {
			e.t.Logf("driver %T implements driver.%s but does not report %s: the front-end will not use it", e.d, iface, flag)
		}
	}
	_, ok := e.d.(driver.Notifier)
	unreported(ok, c.Notify, "Notifier", "Notify")
	_, ok = e.d.(driver.Acquirer)
	unreported(ok, c.Acquire, "Acquirer", "Acquire")
	_, ok = e.d.(driver.LossWatcher)
	unreported(ok, c.WatchLoss, "LossWatcher", "WatchLoss")
	_, ok = e.d.(driver.BatchRefresher)
	unreported(ok, c.RefreshBatch, "BatchRefresher", "RefreshBatch")
	_, ok = e.d.(driver.Inspector)
	unreported(ok, c.Inspect, "Inspector", "Inspect")
}
