package etcddriver_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/etcddriver"
	"github.com/go-locker/locker/internal/drivertest"
)

const countedTTL = 10 * time.Second

// creq is a counted request for weight units of a key of limit units.
func creq(key, o string, limit, weight int64) driver.Request {
	r := req(key, o, driver.Shared, countedTTL)
	r.Limit, r.Weight = limit, weight
	return r
}

// inspect returns the state of key, failing t on error.
func inspect(t *testing.T, d *etcddriver.Driver, key string) driver.KeyState {
	t.Helper()
	st, err := d.Inspect(ctxT(t), key)
	if err != nil {
		t.Fatalf("Inspect(%q): %v", key, err)
	}
	return st
}

// waitWaiting waits until key has n queued entries.
func waitWaiting(t *testing.T, d *etcddriver.Driver, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := inspect(t, d, key)
		if st.Waiting == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("key %q: %d waiting, want %d (state %+v)", key, st.Waiting, n, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// weights returns the owners and weights of st's holders.
func weights(st driver.KeyState) map[string]int64 {
	m := make(map[string]int64)
	for _, h := range st.Holders {
		m[h.Owner] = h.Weight
	}
	return m
}

// TestCountedFIFO checks that a waiter of weight 3 on a key of 4 units is
// not overtaken by newcomers of weight 1, which would fit beside the
// holders, and that waiters are granted in order as units are released.
func TestCountedFIFO(t *testing.T) {
	const limit = 4
	key := uniqueKey(t, "sem")
	d, other := newDriver(t), newDriver(t)
	ctx := ctxT(t)
	a := mustAcquire(t, d, creq(key, owner(), limit, 2))
	b := mustAcquire(t, other, creq(key, owner(), limit, 1))
	if a.Token >= b.Token {
		t.Fatalf("tokens %d then %d", a.Token, b.Token)
	}

	cReq := creq(key, owner(), limit, 3)
	cc := drivertest.AcquireAsync(ctx, other, cReq)
	waitWaiting(t, d, key, 1)

	refuseNewcomers(t, d, other, key, limit, a, b)

	dReq := creq(key, owner(), limit, 1)
	dc := drivertest.AcquireAsync(ctx, d, dReq)
	waitWaiting(t, d, key, 2)

	// 2 units leave: the waiter of 3 fits beside the holder of 1; the
	// waiter of 1 behind it does not (1+3+1 > 4).
	if err := d.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	r := <-cc
	if r.Err != nil {
		t.Fatalf("Acquire of 3 units: %v", r.Err)
	}
	if r.Lease.Token <= b.Token || r.Lease.Mode != driver.Shared {
		t.Errorf("Acquire of 3 units = %+v", r.Lease)
	}
	st := inspect(t, d, key)
	if got := weights(st); len(got) != 2 || got[b.Owner] != 1 || got[cReq.Owner] != 3 || st.Waiting != 1 {
		t.Fatalf("state after the first release: %+v", st)
	}
	drivertest.WantWaiting(t, dc, "(the waiter of 1 unit) beside 4 units")
	if err := other.Release(ctx, b); err != nil {
		t.Fatal(err)
	}
	r2 := <-dc
	if r2.Err != nil {
		t.Fatalf("Acquire of 1 unit: %v", r2.Err)
	}
	if r2.Lease.Token <= r.Lease.Token {
		t.Errorf("tokens: waiter of 3 got %d, waiter of 1 behind it %d", r.Lease.Token, r2.Lease.Token)
	}
	for _, x := range []struct {
		d *etcddriver.Driver
		l driver.Lease
	}{{other, r.Lease}, {d, r2.Lease}} {
		if _, err := x.d.Refresh(ctx, x.l); err != nil {
			t.Errorf("Refresh(%+v): %v", x.l, err)
		}
		if err := x.d.Release(ctx, x.l); err != nil {
			t.Errorf("Release(%+v): %v", x.l, err)
		}
	}
}

// refuseNewcomers is TestCountedFIFO's check that newcomers of weight 1
// are refused behind a waiter of 3, through d and other, while a (2 units)
// and b (1 unit) hold key, and leave nothing behind.
func refuseNewcomers(t *testing.T, d, other *etcddriver.Driver, key string, limit int64, a, b driver.Lease) {
	t.Helper()
	ctx := ctxT(t)
	// Newcomers of weight 1 would fit (2+1+1 <= 4), but the waiter is
	// ahead of them: refused, and they leave nothing behind.
	for _, dd := range []*etcddriver.Driver{d, other} {
		for range 2 {
			if _, err := dd.TryAcquire(ctx, creq(key, owner(), limit, 1)); !errors.Is(err, driver.ErrLocked) {
				t.Fatalf("TryAcquire of 1 unit behind a waiter of 3: %v; want ErrLocked", err)
			}
		}
	}
	qo := owner()
	if _, err := tryQueued(d, ctx, creq(key, qo, limit, 1)); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("TryAcquireQueued of 1 unit behind a waiter of 3: %v; want ErrLocked", err)
	}
	if err := d.Release(ctx, driver.Lease{Key: key, Owner: qo, Mode: driver.Shared, Abandoned: true}); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Release of a queued entry: %v", err)
	}
	st := inspect(t, d, key)
	if got := weights(st); len(got) != 2 || got[a.Owner] != 2 || got[b.Owner] != 1 || st.Waiting != 1 || st.Limit != limit {
		t.Fatalf("state after refused newcomers: %+v", st)
	}
}

// wantLimitError checks that err wraps a *driver.LimitError with limit
// theirs.
func wantLimitError(t *testing.T, what string, err error, theirs int64) {
	t.Helper()
	var le *driver.LimitError
	if !errors.As(err, &le) || !errors.Is(err, driver.ErrLimitMismatch) || le.Limit != theirs {
		t.Errorf("%s: %v; want a *driver.LimitError with Limit %d", what, err, theirs)
	}
	if errors.Is(err, driver.ErrLocked) {
		t.Errorf("%s: %v matches ErrLocked", what, err)
	}
}

// TestCountedLimitMismatch checks that requests whose limit disagrees
// with the live entries' are refused with a *driver.LimitError, through
// every way of acquiring, and leave nothing behind.
func TestCountedLimitMismatch(t *testing.T) {
	d, other := newDriver(t), newDriver(t)
	ctx := ctxT(t)
	ways := []struct {
		name string
		f    func(*etcddriver.Driver, driver.Request) (driver.Lease, error)
	}{
		{"TryAcquire", func(d *etcddriver.Driver, r driver.Request) (driver.Lease, error) { return d.TryAcquire(ctx, r) }},
		{"TryAcquireQueued", func(d *etcddriver.Driver, r driver.Request) (driver.Lease, error) {
			return tryQueued(d, ctx, r)
		}},
		{"Acquire", func(d *etcddriver.Driver, r driver.Request) (driver.Lease, error) { return d.Acquire(ctx, r) }},
	}
	check := func(key string, held []driver.Lease, r driver.Request, theirs int64) {
		t.Helper()
		for _, w := range ways {
			for _, dd := range []*etcddriver.Driver{d, other} {
				r.Owner = owner()
				l, err := w.f(dd, r)
				wantLimitError(t, w.name+" (limit "+strconv.FormatInt(r.Limit, 10)+")", err, theirs)
				if err == nil {
					_ = dd.Release(ctx, l)
				}
				// Whatever an entry the call may have put is gone.
				st := inspect(t, d, key)
				if len(st.Holders) != len(held) || st.Waiting != 0 {
					t.Fatalf("%s left %+v", w.name, st)
				}
			}
		}
	}

	key := uniqueKey(t, "counted")
	h := mustAcquire(t, d, creq(key, owner(), 4, 1))
	check(key, []driver.Lease{h}, creq(key, "", 5, 1), 4)
	check(key, []driver.Lease{h}, req(key, "", driver.Shared, countedTTL), 4)
	// An exclusive request conflicts rather than disagrees.
	if _, err := other.TryAcquire(ctx, req(key, owner(), driver.Exclusive, countedTTL)); !errors.Is(err, driver.ErrLocked) {
		t.Errorf("exclusive TryAcquire on a counted key: %v; want ErrLocked", err)
	}
	// The same limit is granted.
	h2 := mustAcquire(t, other, creq(key, owner(), 4, 3))
	if st := inspect(t, d, key); len(st.Holders) != 2 || st.Limit != 4 || st.Holders[1].Weight != 3 {
		t.Errorf("two holders of 4 units: %+v", st)
	}
	for _, x := range []struct {
		d *etcddriver.Driver
		l driver.Lease
	}{{d, h}, {other, h2}} {
		if err := x.d.Release(ctx, x.l); err != nil {
			t.Fatal(err)
		}
	}

	// Uncounted shared holders have limit 0.
	key = uniqueKey(t, "shared")
	s := mustAcquire(t, d, req(key, owner(), driver.Shared, countedTTL))
	check(key, []driver.Lease{s}, creq(key, "", 3, 1), 0)
	if err := d.Release(ctx, s); err != nil {
		t.Fatal(err)
	}

	checkExclusive(t, d, other)
}

// checkExclusive is TestCountedLimitMismatch on a key held exclusively: a
// counted request behind the holder is locked, not refused for its limit.
func checkExclusive(t *testing.T, d, other *etcddriver.Driver) {
	t.Helper()
	ctx := ctxT(t)
	// A counted request behind an exclusive holder waits: it is locked,
	// not refused for its limit.
	key := uniqueKey(t, "exclusive")
	x := mustAcquire(t, d, req(key, owner(), driver.Exclusive, countedTTL))
	if _, err := other.TryAcquire(ctx, creq(key, owner(), 3, 1)); !errors.Is(err, driver.ErrLocked) {
		t.Errorf("counted TryAcquire on an exclusive key: %v; want ErrLocked", err)
	}
	if err := d.Release(ctx, x); err != nil {
		t.Fatal(err)
	}

}

// TestCountedReacquire checks that an idempotent re-acquire keeps the
// token, the weight and the value first granted, and that refreshes of
// counted leases (with a token, without one, and in a batch) check the
// grant.
func TestCountedReacquire(t *testing.T) {
	d := newDriver(t)
	ctx := ctxT(t)
	key := uniqueKey(t, "sem")
	r := creq(key, owner(), 3, 2)
	r.Value = "first"
	l := mustAcquire(t, d, r)
	r2 := r
	r2.Weight, r2.Value = 1, "second"
	l2 := mustAcquire(t, d, r2)
	if l2.Token != l.Token {
		t.Errorf("re-acquire: token %d, then %d", l.Token, l2.Token)
	}
	st := inspect(t, d, key)
	if len(st.Holders) != 1 || st.Holders[0].Weight != 2 || st.Holders[0].Value != "first" {
		t.Errorf("after a re-acquire: %+v", st)
	}
	// 2 of 3 units are held: a request of 2 more waits in the queue.
	qr := creq(key, owner(), 3, 2)
	if _, err := tryQueued(d, ctx, qr); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("TryAcquireQueued of 2 beside 2 of 3: %v", err)
	}
	q := driver.Lease{Key: key, Owner: qr.Owner, Mode: driver.Shared, TTL: countedTTL}
	if _, err := d.Refresh(ctx, q); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Refresh of a queued counted entry: %v; want ErrNotHeld", err)
	}
	if _, err := d.Refresh(ctx, l); err != nil {
		t.Errorf("Refresh(token %d): %v", l.Token, err)
	}
	errs := d.RefreshBatch(ctx, []driver.Lease{l, q})
	if errs[0] != nil || !errors.Is(errs[1], driver.ErrNotHeld) {
		t.Errorf("RefreshBatch: %v; want nil, ErrNotHeld", errs)
	}
	// The holder leaves: the queued entry is at the head, and its next
	// attempt is granted.
	if err := d.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	lq, err := tryQueued(d, ctx, qr)
	if err != nil || lq.Token <= l.Token {
		t.Fatalf("TryAcquireQueued at the head: %+v, %v", lq, err)
	}
	if err := d.Release(ctx, lq); err != nil {
		t.Fatal(err)
	}
}

// TestValues checks that values are kept with every kind of grant, of
// any bytes, reported by Inspect (with weights and the limit), kept on a
// re-acquire and gone with the hold.
func TestValues(t *testing.T) {
	d, other := newDriver(t), newDriver(t)
	ctx := ctxT(t)
	const head = "\x00leader/\xff,\x00"
	binary := head + strings.Repeat("v", driver.MaxValueLen-len(head))

	key := uniqueKey(t, "election")
	r := req(key, owner(), driver.Exclusive, countedTTL)
	r.Value = binary
	l := mustAcquire(t, d, r)
	r.Value = "other"
	mustAcquire(t, d, r)
	st := inspect(t, other, key)
	if len(st.Holders) != 1 || st.Holders[0].Value != binary || st.Holders[0].Owner != l.Owner || st.Holders[0].Weight != 0 || st.Limit != 0 {
		t.Errorf("exclusive holder with a value: %+v", st)
	}
	// A waiter's value is not a holder's.
	wr := req(key, owner(), driver.Exclusive, countedTTL)
	wr.Value = "waiter"
	if _, err := tryQueued(other, ctx, wr); !errors.Is(err, driver.ErrLocked) {
		t.Fatal(err)
	}
	if st := inspect(t, other, key); len(st.Holders) != 1 || st.Holders[0].Value != binary || st.Waiting != 1 {
		t.Errorf("with a waiter: %+v", st)
	}
	if err := d.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	wl, err := tryQueued(other, ctx, wr)
	if err != nil {
		t.Fatal(err)
	}
	if st := inspect(t, d, key); len(st.Holders) != 1 || st.Holders[0].Value != "waiter" || st.Holders[0].Owner != wr.Owner {
		t.Errorf("after the handover: %+v", st)
	}
	if err := other.Release(ctx, wl); err != nil {
		t.Fatal(err)
	}
	if st := inspect(t, d, key); len(st.Holders) != 0 || st.Waiting != 0 {
		t.Errorf("after the release: %+v", st)
	}

	testSharedValues(t, d, other, binary)
}

// testSharedValues is TestValues for shared holders, uncounted and counted:
// d and other are two drivers, binary a value of MaxValueLen bytes.
func testSharedValues(t *testing.T, d, other *etcddriver.Driver, binary string) {
	ctx := ctxT(t)
	key := uniqueKey(t, "shared")
	sr := req(key, owner(), driver.Shared, countedTTL)
	sr.Value = "reader"
	s := mustAcquire(t, d, sr)
	if st := inspect(t, d, key); len(st.Holders) != 1 || st.Holders[0].Value != "reader" || st.Mode != driver.Shared {
		t.Errorf("shared holder with a value: %+v", st)
	}
	if err := d.Release(ctx, s); err != nil {
		t.Fatal(err)
	}
	key = uniqueKey(t, "sem")
	var ls []driver.Lease
	for i, w := range []int64{1, 3} {
		cr := creq(key, owner(), 5, w)
		if i == 1 {
			cr.Value = binary
		}
		ls = append(ls, mustAcquire(t, []*etcddriver.Driver{d, other}[i], cr))
	}
	st := inspect(t, d, key)
	if len(st.Holders) != 2 || st.Limit != 5 || st.Mode != driver.Shared ||
		st.Holders[0].Weight != 1 || st.Holders[0].Value != "" ||
		st.Holders[1].Weight != 3 || st.Holders[1].Value != binary || st.Fence != ls[1].Token {
		t.Errorf("counted holders: %+v", st)
	}
	if n, err := d.ForceRelease(ctx, key); err != nil || n != 2 {
		t.Errorf("ForceRelease = %d, %v; want 2", n, err)
	}
	if st := inspect(t, d, key); len(st.Holders) != 0 || st.Limit != 0 {
		t.Errorf("after ForceRelease: %+v", st)
	}
}

// TestCountedRoundTrips counts the requests of counted attempts: a grant
// is one transaction; a refusal is that transaction and the Delete of the
// entry it put, and a refusal right after another is one read.
func TestCountedRoundTrips(t *testing.T) {
	c, rc := countingClient(t)
	d := newDriverOn(t, c, nil)
	ctx := ctxT(t)
	key := uniqueKey(t, "sem")
	// Three leases in the pool, proved moments ago.
	var warm []driver.Lease
	for range 3 {
		warm = append(warm, mustAcquire(t, d, creq(key, owner(), 4, 1)))
	}
	for _, l := range warm {
		if err := d.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	step := func(what string, want map[string]int, f func()) {
		t.Helper()
		rc.reset()
		f()
		got := nonZero(rc.reset())
		delete(got, "keep-alive") // a pooled lease proved over a tenth of its TTL ago needs one
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %v; want %v (and keep-alives)", what, got, want)
				return
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: %v; want %v (and keep-alives)", what, got, want)
		}
	}
	var a, b driver.Lease
	step("a grant of a free key", map[string]int{"Txn": 1}, func() { a = mustAcquire(t, d, creq(key, owner(), 4, 2)) })
	step("a grant beside a holder", map[string]int{"Txn": 1}, func() { b = mustAcquire(t, d, creq(key, owner(), 4, 1)) })
	refused := func() {
		if _, err := d.TryAcquire(ctx, creq(key, owner(), 4, 2)); !errors.Is(err, driver.ErrLocked) {
			t.Fatalf("TryAcquire of 2 beside 3 of 4: %v", err)
		}
	}
	step("a refusal", map[string]int{"Txn": 1, "DeleteRange": 1}, refused)
	step("a refusal after a refusal", map[string]int{"Txn": 1, "DeleteRange": 1}, refused)
	step("a release", map[string]int{"DeleteRange": 1}, func() {
		if err := d.Release(ctx, a); err != nil {
			t.Fatal(err)
		}
	})
	if err := d.Release(ctx, b); err != nil {
		t.Fatal(err)
	}
}
