package lockertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
)

const (
	// queueGap separates the Acquire calls whose queue order the suite
	// relies on: the earlier call must have joined the backend's queue
	// when the next one starts.
	queueGap = 250 * time.Millisecond
	// holdTime is how long a waiter of the FIFO check holds the key
	// before releasing it, so that an overlapping grant would be seen.
	holdTime = 50 * time.Millisecond
	// quietTime is how long the suite waits for a callback that must not
	// come.
	quietTime = 300 * time.Millisecond
)

// grant is the outcome of one Acquire call run in a goroutine.
type grant struct {
	i   int // which waiter
	r   driver.Request
	l   driver.Lease
	err error
}

// testAcquire checks driver.Acquirer: a free key is granted at once,
// waiters are served in the order they queued, and a waiter that gives up
// leaves nothing behind.
func testAcquire(e *env) {
	e.skipUnless(e.caps.Acquire, "Acquire")
	ds := e.drivers(5)
	acq := func(i int) driver.Acquirer { return claimed[driver.Acquirer](e, ds[i]) }

	// A free key is granted at once.
	key := e.key("free")
	r := req(key, driver.Exclusive, e.long)
	sent := time.Now()
	l, err := acq(0).Acquire(e.ctx, r)
	if err != nil {
		e.t.Fatalf("Acquire(%s) of a free key: %v", fmtReq(r), err)
	}
	if d := time.Since(sent); d > notifyWait {
		e.t.Errorf("Acquire(%s) of a free key took %v; want it granted at once", fmtReq(r), d)
	}
	e.checkLease("Acquire", r, l)
	e.expectLocked(ds[1], key, driver.Exclusive, sent, validTTL(r, l))
	e.release(ds[0], l)
	e.expectFree(ds[1], key, driver.Exclusive, "after the owner granted by Acquire released")

	if !testAcquireFIFO(e, ds, acq) {
		return
	}
	testAcquireGiveUp(e, ds, acq)
	if e.sharer() {
		testAcquireShared(e, ds, acq)
	}
}

// testAcquireFIFO queues three waiters, on three clients, one after the
// other behind a holder: when it releases, they are granted the key in
// that order, one at a time, with growing tokens. It reports whether the
// subtest may go on.
func testAcquireFIFO(e *env, ds []driver.Driver, acq func(int) driver.Acquirer) bool {
	key := e.key("fifo")
	la, _ := e.acquire(ds[0], req(key, driver.Exclusive, e.long))
	ctx, cancel := context.WithCancel(e.ctx)
	const waiters = 3
	grants := make(chan grant, waiters)
	var holders atomic.Int32
	var wg sync.WaitGroup
	defer func() {
		cancel() // waiters still waiting give up; granted ones release
		wg.Wait()
	}()
	for i := 1; i <= waiters; i++ {
		r := req(key, driver.Exclusive, e.long)
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := acq(i).Acquire(ctx, r)
			if err != nil {
				grants <- grant{i: i, r: r, err: err}
				return
			}
			if n := holders.Add(1); n != 1 {
				e.errorf("Acquire(%s) granted the key while %d other owners held it", fmtReq(r), n-1)
			}
			grants <- grant{i: i, r: r, l: l}
			time.Sleep(holdTime)
			holders.Add(-1)
			if err := ds[i].Release(e.ctx, l); err != nil {
				e.errorf("Release(%s) of a lease granted by Acquire: %v", fmtLease(l), err)
			}
		}()
		if !e.sleep(queueGap) {
			return false
		}
	}
	if !checkNoGrantYet(e, grants) {
		return false
	}
	e.release(ds[0], la)
	if !checkFIFOGrants(e, grants, waiters, la.Token) {
		return false
	}
	wg.Wait()
	e.expectFree(ds[4], key, driver.Exclusive, "after every waiter granted by Acquire released")
	return !e.t.Failed()
}

// checkNoGrantYet checks, while the holder is still there, that no waiter
// has been granted the key nor given up; it reports whether none has.
func checkNoGrantYet(e *env, grants <-chan grant) bool {
	select {
	case g := <-grants:
		if g.err != nil {
			e.t.Errorf("Acquire(%s) while another owner holds the key: %v; want it to wait", fmtReq(g.r), g.err)
		} else {
			e.t.Errorf("Acquire(%s) was granted the key (token %d) while another owner held it", fmtReq(g.r), g.l.Token)
		}
		return false
	default:
	}
	return true
}

// checkFIFOGrants checks, once the holder whose token was last has
// released, that the waiters numbered 1 to waiters are granted the key in
// that order with growing tokens; it reports whether every one was.
func checkFIFOGrants(e *env, grants <-chan grant, waiters int, last uint64) bool {
	for want := 1; want <= waiters; want++ {
		select {
		case g := <-grants:
			if g.err != nil {
				e.t.Errorf("Acquire(%s) by waiter %d: %v", fmtReq(g.r), g.i, g.err)
				return false
			}
			e.checkLease("Acquire", g.r, g.l)
			if g.i != want {
				e.t.Errorf("waiter %d was granted the key before waiter %d, which had called Acquire %v earlier; want the backend's queue order (FIFO)", g.i, want, time.Duration(g.i-want)*queueGap)
			}
			if g.l.Token <= last {
				e.t.Errorf("Acquire granted waiter %d token %d after an earlier grant's %d; want strictly increasing tokens", g.i, g.l.Token, last)
			}
			last = g.l.Token
		case <-time.After(notifyWait + holdTime):
			e.t.Errorf("no Acquire was granted the key within %v after the holder (or the waiter before) released it; want waiter %d served", notifyWait+holdTime, want)
			return false
		case <-e.ctx.Done():
			return false
		}
	}
	return true
}

// testAcquireGiveUp checks that an Acquire whose context is cancelled, or
// times out, while it waits returns an error wrapping the context's error
// and leaves nothing held or queued.
func testAcquireGiveUp(e *env, ds []driver.Driver, acq func(int) driver.Acquirer) {
	checkAcquireCancelledInQueue(e, ds, acq)
	checkAcquireTimesOutAlone(e, ds, acq)
}

// checkAcquireCancelledInQueue cancels the first of two waiters: the
// second is served when the holder releases, then a newcomer.
func checkAcquireCancelledInQueue(e *env, ds []driver.Driver, acq func(int) driver.Acquirer) {
	key := e.key("cancel")
	la, _ := e.acquire(ds[0], req(key, driver.Exclusive, e.long))
	ctxB, cancelB := context.WithCancel(e.ctx)
	defer cancelB()
	ctxC, cancelC := context.WithCancel(e.ctx)
	defer cancelC()
	rb, rc := req(key, driver.Exclusive, e.long), req(key, driver.Exclusive, e.long)
	gb, gc := make(chan grant, 1), make(chan grant, 1)
	start := func(i int, ctx context.Context, r driver.Request, c chan grant) {
		go func() {
			l, err := acq(i).Acquire(ctx, r)
			c <- grant{i: i, r: r, l: l, err: err}
		}()
	}
	start(1, ctxB, rb, gb)
	e.sleep(queueGap)
	start(2, ctxC, rc, gc)
	e.sleep(queueGap)
	cancelB()
	cancelled := time.Now()
	select {
	case g := <-gb:
		switch {
		case g.err == nil:
			e.t.Errorf("Acquire(%s) was granted the key (token %d) while another owner held it", fmtReq(rb), g.l.Token)
			ds[1].Release(e.ctx, g.l)
		case !errors.Is(g.err, context.Canceled):
			e.t.Errorf("Acquire(%s) whose context was cancelled while it waited: %v; want an error wrapping context.Canceled", fmtReq(rb), g.err)
		}
		if d := time.Since(cancelled); d > notifyWait {
			e.t.Errorf("Acquire(%s) returned %v after its context was cancelled; want it to return promptly", fmtReq(rb), d)
		}
	case <-time.After(notifyWait):
		e.t.Errorf("Acquire(%s) had not returned %v after its context was cancelled", fmtReq(rb), notifyWait)
		<-gb
	}
	e.release(ds[0], la)
	select {
	case g := <-gc:
		if g.err != nil {
			e.t.Errorf("Acquire(%s) queued behind a waiter that gave up: %v", fmtReq(rc), g.err)
			break
		}
		e.checkLease("Acquire", rc, g.l)
		if g.l.Token <= la.Token {
			e.t.Errorf("Acquire granted token %d after the holder's %d; want strictly increasing tokens", g.l.Token, la.Token)
		}
		e.release(ds[2], g.l)
	case <-time.After(notifyWait):
		e.t.Errorf("Acquire(%s) queued behind a waiter that gave up was not granted the key within %v of its release (the cancelled waiter left its place in the queue?)", fmtReq(rc), notifyWait)
		cancelC()
		if g := <-gc; g.err == nil {
			ds[2].Release(e.ctx, g.l)
		}
	}
	e.expectFreeSoon(ds[3], key, "after a waiter whose Acquire was cancelled gave up, and the waiter behind it released (a hold or queue entry left behind?)")
}

// checkAcquireTimesOutAlone lets a lone waiter time out: a newcomer gets
// the key as soon as the holder releases.
func checkAcquireTimesOutAlone(e *env, ds []driver.Driver, acq func(int) driver.Acquirer) {
	key := e.key("timeout")
	la, _ := e.acquire(ds[0], req(key, driver.Exclusive, e.long))
	ctx, cancel := context.WithTimeout(e.ctx, queueGap)
	rb := req(key, driver.Exclusive, e.long)
	l, err := acq(1).Acquire(ctx, rb)
	cancel()
	switch {
	case err == nil:
		e.t.Errorf("Acquire(%s) was granted the key (token %d) while another owner held it", fmtReq(rb), l.Token)
		ds[1].Release(e.ctx, l)
	case !errors.Is(err, context.DeadlineExceeded):
		e.t.Errorf("Acquire(%s) whose context timed out while it waited: %v; want an error wrapping context.DeadlineExceeded", fmtReq(rb), err)
	}
	e.release(ds[0], la)
	e.expectFreeSoon(ds[3], key, "right after the holder released, once a waiter's Acquire had timed out (a hold or queue entry left behind?)")
}

// testAcquireShared checks that shared waiters queued behind a writer are
// granted the key together when it releases.
func testAcquireShared(e *env, ds []driver.Driver, acq func(int) driver.Acquirer) {
	key := e.key("shared")
	lw, _ := e.acquire(ds[0], req(key, driver.Exclusive, e.long))
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	const readers = 2
	grants := make(chan grant, readers)
	for i := 1; i <= readers; i++ {
		r := req(key, driver.Shared, e.long)
		go func() {
			l, err := acq(i).Acquire(ctx, r)
			grants <- grant{i: i, r: r, l: l, err: err}
		}()
		e.sleep(queueGap)
	}
	e.release(ds[0], lw)
	var held []grant
	timeout := time.After(notifyWait)
	for range readers {
		select {
		case g := <-grants:
			if g.err != nil {
				e.t.Errorf("Acquire(%s) of a key a writer released: %v", fmtReq(g.r), g.err)
				continue
			}
			e.checkLease("Acquire", g.r, g.l)
			held = append(held, g)
		case <-timeout:
			e.t.Errorf("only %d of %d shared waiters were granted the key within %v of the writer's release; want them served together", len(held), readers, notifyWait)
			cancel()
			if g := <-grants; g.err == nil {
				held = append(held, g)
			}
		}
	}
	for _, g := range held {
		e.release(ds[g.i], g.l)
	}
	e.expectFree(ds[3], key, driver.Exclusive, "after the shared waiters granted by Acquire released")
}

// expectFreeSoon checks that a new owner can acquire key within
// notifyWait, as a freed key's cleanup may take a notification to reach
// the backend, and releases it again.
func (e *env) expectFreeSoon(d driver.Driver, key, why string) {
	e.t.Helper()
	deadline := time.Now().Add(notifyWait)
	for {
		r := req(key, driver.Exclusive, e.long)
		l, err := d.TryAcquire(e.ctx, r)
		if err == nil {
			e.checkLease("TryAcquire", r, l)
			e.release(d, l)
			return
		}
		if !errors.Is(err, driver.ErrLocked) || time.Now().After(deadline) {
			e.t.Errorf("%s: TryAcquire(%s) by a new owner: %v; want the key free within %v", why, fmtReq(r), err, notifyWait)
			return
		}
		if !e.sleep(10 * time.Millisecond) {
			return
		}
	}
}

// testWatchLoss checks driver.LossWatcher on the paths every backend
// shares: no report for a lease that is refreshed, released, or whose
// watch was stopped.
func testWatchLoss(e *env) {
	e.skipUnless(e.caps.WatchLoss, "WatchLoss")
	ds := e.drivers(2)
	lw := claimed[driver.LossWatcher](e, ds[0])
	// The callback only records its calls: a driver that calls it after
	// stop returned might do so after the subtest ended.
	watch := func(l driver.Lease) (calls *lossCalls, stop func()) {
		calls = new(lossCalls)
		stop = lw.WatchLoss(l, calls.lost)
		if stop == nil {
			e.t.Fatalf("WatchLoss(%s) returned a nil stop function", fmtLease(l))
		}
		return calls, stop
	}

	// A live lease, refreshed, then the watch stopped, then the lease
	// released: no report at any time.
	key := e.key("live")
	r := req(key, driver.Exclusive, e.long)
	l, sent := e.acquire(ds[0], r)
	calls, stop := watch(l)
	e.sleep(quietTime)
	e.refresh(ds[0], l)
	e.sleep(quietTime)
	e.expectLocked(ds[1], key, driver.Exclusive, sent, validTTL(r, l))
	stop()
	e.release(ds[0], l)
	e.sleep(quietTime)
	if n, err := calls.get(); n != 0 {
		e.t.Errorf("WatchLoss(%s): lost called %d times (first with %v) for a lease that was refreshed, then stopped, then released", fmtLease(l), n, err)
	}

	// Released first, then stopped: a normal Release is not a loss.
	key = e.key("released")
	l, _ = e.acquire(ds[0], req(key, driver.Exclusive, e.long))
	calls, stop = watch(l)
	e.release(ds[0], l)
	e.sleep(quietTime)
	stop()
	e.sleep(quietTime)
	if n, err := calls.get(); n != 0 {
		e.t.Errorf("WatchLoss(%s): lost called %d times (first with %v) after the owner's normal Release; want no report", fmtLease(l), n, err)
	}
	e.expectFree(ds[1], key, driver.Exclusive, "after a watched lease was released and its watch stopped")
}

// lossCalls records the calls of a WatchLoss callback.
type lossCalls struct {
	mu    sync.Mutex
	n     int
	first error
}

func (c *lossCalls) lost(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == 0 {
		c.first = err
	}
	c.n++
}

func (c *lossCalls) get() (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n, c.first
}

// testTTLUnit checks Capabilities.TTLUnit: the suite's TTLs are whole
// numbers of it, and the front-end refuses a TTL that is not, within
// [MinTTL, MaxTTL], before calling the driver.
func testTTLUnit(e *env) {
	u := e.caps.TTLUnit
	e.skipUnless(u > 0, "a TTLUnit")
	for _, ttl := range []time.Duration{e.short, e.medium, e.long} {
		if ttl%u != 0 {
			e.t.Errorf("the suite chose TTL %v, not a whole number of the TTLUnit %v", ttl, u)
		}
	}
	lo, hi := e.ttlRange()
	var bad time.Duration
	for _, c := range []time.Duration{
		e.medium + u/2, e.long + u/2, lo + u/2, e.short + time.Nanosecond, lo + time.Nanosecond, hi - time.Nanosecond,
	} {
		if c > 0 && c >= lo && (hi <= 0 || c <= hi) && c%u != 0 {
			bad = c
			break
		}
	}
	if bad == 0 {
		e.t.Skipf("no TTL within [%v, %v] that is not a whole number of the TTLUnit %v", lo, hi, u)
	}
	ds := e.drivers(2)
	cd := &checkOnly{d: ds[0]}
	key := e.key("k")
	m := locker.NewMutex(cd, key, locker.WithTTL(bad))
	want := func(op string, err error) {
		e.t.Helper()
		if !errors.Is(err, locker.ErrInvalidTTL) || !strings.Contains(fmt.Sprint(err), u.String()) {
			e.t.Errorf("%s with TTL %v, not a whole number of the TTLUnit %v: %v; want an error wrapping locker.ErrInvalidTTL that names the unit", op, bad, u, err)
		}
	}
	want("Mutex.LockContext", m.LockContext(e.ctx))
	_, err := m.TryLockContext(e.ctx)
	want("Mutex.TryLockContext", err)
	if n := cd.calls.Load(); n != 0 {
		e.t.Errorf("a lock call with TTL %v, not a whole number of the TTLUnit %v, made %d driver calls; want none", bad, u, n)
	}
	e.expectFree(ds[1], key, driver.Exclusive, "after lock calls with a TTL that is not a whole number of the TTLUnit")
}

// checkOnly passes the driver's TTL limits through and counts its calls.
type checkOnly struct {
	d     driver.Driver
	calls atomic.Int32
}

func (c *checkOnly) TryAcquire(ctx context.Context, r driver.Request) (driver.Lease, error) {
	c.calls.Add(1)
	return c.d.TryAcquire(ctx, r)
}

func (c *checkOnly) Refresh(ctx context.Context, l driver.Lease) (driver.Lease, error) {
	c.calls.Add(1)
	return c.d.Refresh(ctx, l)
}

func (c *checkOnly) Release(ctx context.Context, l driver.Lease) error {
	c.calls.Add(1)
	return c.d.Release(ctx, l)
}

func (c *checkOnly) Capabilities() driver.Capabilities {
	caps := driver.CapabilitiesOf(c.d)
	return driver.Capabilities{MinTTL: caps.MinTTL, MaxTTL: caps.MaxTTL, TTLUnit: caps.TTLUnit}
}
