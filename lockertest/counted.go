package lockertest

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-locker/locker/driver"
)

// counted returns a counted Shared request for w of limit units of key.
func counted(key string, limit, w int64, ttl time.Duration) driver.Request {
	r := req(key, driver.Shared, ttl)
	r.Limit, r.Weight = limit, w
	return r
}

// skipUnlessCounted skips the subtest unless the drivers grant counted
// Shared requests.
func (e *env) skipUnlessCounted() {
	e.t.Helper()
	e.skipUnless(e.caps.Shared && e.caps.Counted, "Shared and Counted")
}

// testCounted checks Capabilities.Counted: counted holds share the key while
// their weights fit in the limit, each grant has its own increasing token,
// a request whose limit differs from the holders' is refused with a
// *LimitError, exclusive requests conflict, and Inspect reports limit and
// weights.
func testCounted(e *env) {
	e.skipUnlessCounted()
	ds := e.drivers(3)
	key := e.key("k")

	r1 := counted(key, 4, 2, e.long)
	l1, s1 := e.acquire(ds[0], r1)
	r2 := counted(key, 4, 2, e.long)
	l2, _ := e.acquire(ds[1], r2)
	if l2.Token <= l1.Token {
		e.t.Errorf("second counted grant has token %d after the first's %d; want strictly increasing tokens", l2.Token, l1.Token)
	}
	if l, _ := e.acquire(ds[0], r1); l.Token != l1.Token {
		e.t.Errorf("counted re-acquire by the holder returned token %d; want %d", l.Token, l1.Token)
	}
	// Full: one more unit is refused, and so is an exclusive request.
	e.expectLockedReq(ds[2], counted(key, 4, 1, e.long), s1, validTTL(r1, l1))
	e.expectLocked(ds[2], key, driver.Exclusive, s1, validTTL(r1, l1))

	// Another limit, or no limit, is a mismatch, never a grant.
	for _, r := range []driver.Request{counted(key, 5, 1, e.long), req(key, driver.Shared, e.long)} {
		e.expectMismatch(ds[2], r, 4)
	}
	if in := claimed[driver.Inspector](e, e.d); in != nil {
		st := e.inspect(in, key)
		var sum int64
		for _, h := range st.Holders {
			sum += h.Weight
		}
		if st.Mode != driver.Shared || st.Limit != 4 || len(st.Holders) != 2 || sum != 4 {
			e.t.Errorf("Inspect of a key with two counted holds of 2 units of 4 = %+v; want Mode shared, Limit 4, 2 holders weighing 4 in all", st)
		}
	}

	// Units given back are granted again, to the size of what is free.
	e.release(ds[0], l1)
	l3, _ := e.acquire(ds[2], counted(key, 4, 1, e.long))
	if l3.Token <= l2.Token {
		e.t.Errorf("counted grant after a release has token %d after %d; want strictly increasing tokens", l3.Token, l2.Token)
	}
	l4, s4 := e.acquire(ds[0], counted(key, 4, 1, e.long))
	e.expectLockedReq(ds[2], counted(key, 4, 1, e.long), s4, e.long)
	e.release(ds[1], l2)
	e.release(ds[2], l3)
	e.release(ds[0], l4)
	e.expectFree(ds[0], key, driver.Exclusive, "after every counted hold was released")

	// A key free again takes any limit.
	l5, _ := e.acquire(ds[1], counted(key, 1, 1, e.long))
	e.release(ds[1], l5)
	testCountedQueue(e, ds)
}

// testCountedQueue checks that a counted request waiting in the backend's
// queue (Queue or Acquire) is not overtaken by smaller ones that would
// fit: no barging.
func testCountedQueue(e *env, ds []driver.Driver) {
	key := e.key("queue")
	queuer, acquirer := e.caps.Queue, e.caps.Acquire
	if !queuer && !acquirer {
		e.t.Logf("driver %T keeps no wait queue (Capabilities Queue, Acquire): barging not checked", e.d)
		return
	}
	rh := counted(key, 4, 3, e.long)
	lh, sh := e.acquire(ds[0], rh)
	rw := counted(key, 4, 2, e.long)
	var lw driver.Lease
	var werr error
	granted := make(chan struct{})
	if queuer {
		if _, err := tryQueued(e.ctx, ds[1], rw); !errors.Is(err, driver.ErrLocked) {
			e.t.Fatalf("queued TryAcquire(%s) with 3 of 4 units held: %v; want an error wrapping driver.ErrLocked", fmtReq(rw), err)
		}
		close(granted)
	} else {
		go func() {
			defer close(granted)
			lw, werr = claimed[driver.Acquirer](e, ds[1]).Acquire(e.ctx, rw)
		}()
		e.sleep(300 * time.Millisecond) // Acquire has queued by then
	}
	// One unit is free, but a request for 2 waits ahead: refused.
	e.expectLockedReq(ds[2], counted(key, 4, 1, e.long), sh, e.long)
	e.release(ds[0], lh)
	<-granted
	if queuer {
		lw, werr = tryQueued(e.ctx, ds[1], rw)
	}
	if werr != nil {
		e.t.Fatalf("the queued request for 2 units after the holder of 3 released: %v; want a grant", werr)
	}
	if lw.Token <= lh.Token {
		e.t.Errorf("queued counted grant has token %d after %d; want strictly increasing tokens", lw.Token, lh.Token)
	}
	// Two units are left for others.
	l2, _ := e.acquire(ds[2], counted(key, 4, 2, e.long))
	e.release(ds[2], l2)
	e.release(ds[1], lw)
}

// expectMismatch checks that r is refused with a *LimitError naming limit.
func (e *env) expectMismatch(d driver.Driver, r driver.Request, limit int64) {
	e.t.Helper()
	l, err := d.TryAcquire(e.ctx, r)
	if err == nil {
		d.Release(e.ctx, l)
		e.t.Errorf("TryAcquire(%s) on a key with counted holds of limit %d succeeded; want an error wrapping a *driver.LimitError", fmtReq(r), limit)
		return
	}
	var le *driver.LimitError
	if !errors.As(err, &le) || !errors.Is(err, driver.ErrLimitMismatch) || le.Limit != limit {
		e.t.Errorf("TryAcquire(%s) on a key with counted holds of limit %d: %v; want an error wrapping *driver.LimitError{Limit: %d}", fmtReq(r), limit, err, limit)
	}
}

// testValues checks Capabilities.Values: the value of a grant, any bytes,
// is reported by Inspect while the hold lives, kept by an idempotent
// re-acquire, and gone with the hold.
func testValues(e *env) {
	e.skipUnless(e.caps.Values, "Values")
	e.skipUnless(e.caps.Inspect, "Inspect")
	in := claimed[driver.Inspector](e, e.d)
	ds := e.drivers(2)
	key := e.key("k")

	value := "leader-1\x00\xff\n{\"json\": true}"
	r := req(key, driver.Exclusive, e.long)
	r.Value = value
	l, _ := e.acquire(ds[0], r)
	if st := e.inspect(in, key); len(st.Holders) != 1 || st.Holders[0].Value != value {
		e.t.Errorf("Inspect of a hold granted with value %q = %+v; want that value", value, st)
	}
	r2 := r
	r2.Value = "other"
	e.acquire(ds[0], r2)
	if st := e.inspect(in, key); len(st.Holders) != 1 || st.Holders[0].Value != value {
		e.t.Errorf("Inspect after a re-acquire with another value = %+v; want the first value %q", st, value)
	}
	e.release(ds[0], l)
	if st := e.inspect(in, key); len(st.Holders) != 0 {
		e.t.Errorf("Inspect after release = %+v; want no holders", st)
	}

	// The longest value, and a hold without one.
	long := make([]byte, driver.MaxValueLen)
	for i := range long {
		long[i] = byte(i)
	}
	r3 := req(key, driver.Exclusive, e.long)
	r3.Value = string(long)
	l3, _ := e.acquire(ds[1], r3)
	if st := e.inspect(in, key); len(st.Holders) != 1 || st.Holders[0].Value != r3.Value {
		e.t.Errorf("Inspect of a hold granted with a value of %d bytes: value not reported whole", len(long))
	}
	e.release(ds[1], l3)
	l4, _ := e.acquire(ds[1], req(key, driver.Exclusive, e.long))
	if st := e.inspect(in, key); len(st.Holders) != 1 || st.Holders[0].Value != "" {
		e.t.Errorf("Inspect of a hold granted without a value = %+v; want an empty value", st)
	}
	e.release(ds[1], l4)
}

// testCountedHammer has goroutines on three drivers take random weights
// of a key of 5 units, waiting the way each driver offers (Acquire, or
// a queued TryAcquire woken by Subscribe, or TryAcquire retried), while
// another goroutine reads the key with Inspect: the units held, counted
// by the holders and reported by Inspect, never exceed the limit, and the
// key is empty at the end.
func testCountedHammer(e *env) {
	e.skipUnlessCounted()
	const limit, workers, rounds = 5, 9, 20
	ds := e.drivers(3)
	key := e.key("k")
	var held, peak, grants atomic.Int64
	stop := time.Now().Add(hammerTime)
	done := make(chan struct{})
	var wg sync.WaitGroup
	if in := claimed[driver.Inspector](e, e.d); in != nil {
		wg.Add(1)
		go func() { defer wg.Done(); e.inspectCounted(in, key, limit, done) }()
	}
	var workersWG sync.WaitGroup
	for w := range workers {
		d := ds[w%len(ds)]
		workersWG.Add(1)
		go func() {
			defer workersWG.Done()
			for i := 0; i < rounds && time.Now().Before(stop) && e.ctx.Err() == nil; i++ {
				r := counted(key, limit, 1+rand.Int64N(limit), e.long)
				l, err := e.waitFor(d, r)
				if err != nil {
					if e.ctx.Err() == nil {
						e.errorf("waiting for %s: %v", fmtReq(r), err)
					}
					return
				}
				n := held.Add(r.Weight)
				if n > limit {
					e.errorf("%d units of a key of %d held at once", n, limit)
				}
				storeMax(&peak, n)
				grants.Add(1)
				time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
				held.Add(-r.Weight)
				if err := d.Release(e.ctx, l); err != nil {
					e.errorf("Release(%s): %v", fmtLease(l), err)
					return
				}
			}
		}()
	}
	workersWG.Wait()
	close(done)
	wg.Wait()
	if grants.Load() == 0 {
		e.t.Fatalf("no counted request was granted")
	}
	e.t.Logf("%d grants, at most %d of %d units held at once", grants.Load(), peak.Load(), limit)
	e.expectFree(ds[0], key, driver.Exclusive, "after every counted hold was released")
}

// inspectCounted reads key with Inspect until done is closed, and reports
// a state whose holders weigh more than limit, or that is not counted.
func (e *env) inspectCounted(in driver.Inspector, key string, limit int64, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case <-time.After(5 * time.Millisecond):
		}
		st, err := in.Inspect(e.ctx, key)
		if err != nil {
			if e.ctx.Err() == nil {
				e.errorf("Inspect(%q): %v", key, err)
			}
			return
		}
		var sum int64
		for _, h := range st.Holders {
			sum += h.Weight
		}
		if sum > limit || (len(st.Holders) > 0 && (st.Limit != limit || st.Mode != driver.Shared)) {
			e.errorf("Inspect(%q) during counted grants = %+v: %d units held; want at most %d, Mode shared, Limit %d", key, st, sum, limit, limit)
		}
	}
}

// waitFor waits for r on d the way the driver offers: Acquire where the
// Capabilities report it; else TryAcquire (queued, where they report
// Queue) again on each notification (Notify), or after a short pause.
func (e *env) waitFor(d driver.Driver, r driver.Request) (driver.Lease, error) {
	if a := claimed[driver.Acquirer](e, d); a != nil {
		return a.Acquire(e.ctx, r)
	}
	try := d.TryAcquire
	if e.caps.Queue {
		try = func(ctx context.Context, r driver.Request) (driver.Lease, error) { return tryQueued(ctx, d, r) }
	}
	var wake <-chan struct{}
	if n := claimed[driver.Notifier](e, d); n != nil {
		sub, err := n.Subscribe(e.ctx, r.Key)
		if err != nil {
			return driver.Lease{}, err
		}
		defer sub.Close()
		wake = sub.C()
	}
	for {
		l, err := try(e.ctx, r)
		if !errors.Is(err, driver.ErrLocked) {
			return l, err
		}
		select {
		case <-wake:
		case <-time.After(time.Duration(1+rand.IntN(5)) * time.Millisecond):
		case <-e.ctx.Done():
			return driver.Lease{}, e.ctx.Err()
		}
	}
}
