package zkdriver_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/zkdriver"
	"github.com/go-locker/locker/internal/zktest"
)

// counted returns a counted Shared request for weight units of key's limit.
func counted(key, owner string, limit, weight int64) driver.Request {
	return driver.Request{Key: key, Owner: owner, Mode: driver.Shared, TTL: 10 * time.Second, Limit: limit, Weight: weight}
}

// inspect returns key's state as d sees it.
func inspect(t testing.TB, d *zkdriver.Driver, key string) driver.KeyState {
	t.Helper()
	st, err := d.Inspect(ctxT(t), key)
	if err != nil {
		t.Fatalf("Inspect(%q): %v", key, err)
	}
	return st
}

// TestCountedFIFO checks that counted requests are served in arrival
// order: a waiter of weight 3 on a limit of 4 is not overtaken by
// newcomers of weight 1, by TryAcquire or Acquire, and a waiter behind a
// waiter learns of that one's grant at once (not from its lease's expiry).
func TestCountedFIFO(t *testing.T) {
	ds := []*zkdriver.Driver{newDriver(t), newDriver(t), newDriver(t), newDriver(t), newDriver(t)}
	key := plainKey("semfifo")
	a := mustAcquire(t, ds[0], counted(key, owner(), 4, 2))
	w := newWaiters(t)
	const b, d, e = 1, 3, 4 // the waiters' drivers
	next, expectNone := w.next, w.none
	w.queue(b, ds[b], ds[0].Conn(), counted(key, owner(), 4, 3)) // 2+3 > 4: waits
	// 2+1 would fit, but b is first.
	for i := range 3 {
		_, err := ds[2].TryAcquire(ctxT(t), counted(key, owner(), 4, 1))
		if !errors.Is(err, driver.ErrLocked) {
			t.Fatalf("TryAcquire %d of weight 1 behind b: %v; want ErrLocked", i, err)
		}
	}
	w.queue(d, ds[d], ds[0].Conn(), counted(key, owner(), 4, 1))
	w.queue(e, ds[e], ds[0].Conn(), counted(key, owner(), 4, 2))
	expectNone()
	if st := inspect(t, ds[0], key); len(st.Holders) != 1 || st.Waiting != 3 || st.Limit != 4 || st.Holders[0].Weight != 2 {
		t.Fatalf("state with a waiting: %+v", st)
	}
	if err := ds[0].Release(ctxT(t), a); err != nil {
		t.Fatal(err)
	}
	// b (3) and d (1) fit together; e (2) waits for b.
	g1, g2 := next(), next()
	if g1.i > g2.i {
		g1, g2 = g2, g1
	}
	if g1.i != b || g2.i != d {
		t.Fatalf("granted %d and %d; want b (%d) and d (%d)", g1.i, g2.i, b, d)
	}
	if g1.l.Token >= g2.l.Token {
		t.Errorf("b's token %d not below d's %d", g1.l.Token, g2.l.Token)
	}
	expectNone()
	if err := ds[b].Release(ctxT(t), g1.l); err != nil {
		t.Fatal(err)
	}
	ge := next()
	if ge.i != e {
		t.Fatalf("granted %d; want e (%d)", ge.i, e)
	}
	// e took d for a waiter; it must have learnt of d's grant from d, not
	// by deleting d's node when its lease ran out.
	if _, err := ds[d].Refresh(ctxT(t), g2.l); err != nil {
		t.Fatalf("d's hold after e's grant: %v", err)
	}
	st := inspect(t, ds[0], key)
	if len(st.Holders) != 2 || st.Waiting != 0 || st.Holders[0].Weight+st.Holders[1].Weight != 3 {
		t.Errorf("state with d and e: %+v", st)
	}
	for _, l := range []struct {
		d *zkdriver.Driver
		l driver.Lease
	}{{ds[d], g2.l}, {ds[e], ge.l}} {
		if err := l.d.Release(ctxT(t), l.l); err != nil {
			t.Fatal(err)
		}
	}
	if n := lockNodes(t, ds[0].Conn(), key); len(n) != 0 {
		t.Errorf("nodes left: %v", n)
	}
}

// TestCountedLimitMismatch checks that a request whose limit differs from
// that of the key's holders or waiters is refused with a *LimitError,
// and leaves no node.
func TestCountedLimitMismatch(t *testing.T) {
	a, b := newDriver(t), newDriver(t)
	key := plainKey("semlimit")
	expect := func(what string, err error, theirs int64) {
		t.Helper()
		var le *driver.LimitError
		if !errors.As(err, &le) || le.Limit != theirs || !errors.Is(err, driver.ErrLimitMismatch) || errors.Is(err, driver.ErrLocked) {
			t.Errorf("%s: %v; want a LimitError with limit %d", what, err, theirs)
		}
	}
	h := mustAcquire(t, a, counted(key, owner(), 4, 1))
	for i := range 2 { // the second one on a key seen contended
		_, err := b.TryAcquire(ctxT(t), counted(key, owner(), 5, 1))
		expect("TryAcquire with limit 5", err, 4)
		_, err = b.TryAcquire(ctxT(t), req(key, owner(), driver.Shared, 10*time.Second))
		expect("uncounted TryAcquire", err, 4)
		_ = i
	}
	_, err := b.Acquire(ctxT(t), counted(key, owner(), 3, 1))
	expect("Acquire with limit 3", err, 4)
	_, err = b.TryAcquire(ctxT(t), req(key, owner(), driver.Exclusive, 10*time.Second))
	if !errors.Is(err, driver.ErrLocked) || errors.Is(err, driver.ErrLimitMismatch) {
		t.Errorf("exclusive TryAcquire: %v; want ErrLocked", err)
	}
	if n := lockNodes(t, a.Conn(), key); len(n) != 1 {
		t.Errorf("nodes: %v; want the holder's only", n)
	}
	if err := a.Release(ctxT(t), h); err != nil {
		t.Fatal(err)
	}

	// Uncounted shared holders: a counted request is refused.
	h = mustAcquire(t, a, req(key, owner(), driver.Shared, 10*time.Second))
	_, err = b.TryAcquire(ctxT(t), counted(key, owner(), 4, 1))
	expect("counted TryAcquire on a shared hold", err, 0)
	if err := a.Release(ctxT(t), h); err != nil {
		t.Fatal(err)
	}

	// A counted waiter behind an exclusive holder sets the limit too.
	h = mustAcquire(t, a, req(key, owner(), driver.Exclusive, 10*time.Second))
	wr := counted(key, owner(), 4, 2)
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx, wr)
		done <- err
	}()
	waitFor(t, 10*time.Second, "the waiter's node", func() bool { return nodeOf(t, a.Conn(), key, wr.Owner) != "" })
	_, err = a.TryAcquire(ctxT(t), counted(key, owner(), 2, 1))
	expect("TryAcquire with limit 2 behind a waiter of limit 4", err, 4)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Acquire: %v", err)
	}
	if err := b.Release(ctxT(t), driver.Lease{Key: key, Owner: wr.Owner, Mode: driver.Shared}); err != nil && !errors.Is(err, driver.ErrNotHeld) {
		t.Error(err)
	}
	if err := a.Release(ctxT(t), h); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "no nodes", func() bool { return len(lockNodes(t, a.Conn(), key)) == 0 })
}

// TestCountedRequests checks the counted requests' round trips, their
// idempotent re-acquire (same token, same weight) and the validation of
// Limit, Weight and Value.
func TestCountedRequests(t *testing.T) {
	var cnt countingDialer
	d := countedTestDriver(t, &cnt, server(t).Addr, 30*time.Second)
	key := plainKey("semrt")
	mustAcquire(t, d, req(key, owner(), driver.Exclusive, time.Second)) // creates the key's node
	if _, err := d.ForceRelease(ctxT(t), key); err != nil {
		t.Fatal(err)
	}
	r := counted(key, owner(), 3, 2)
	before := cnt.writes.Load()
	l := mustAcquire(t, d, r)
	if n := cnt.writes.Load() - before; n != 1 {
		t.Errorf("uncontended counted TryAcquire: %d round trips; want 1", n)
	}
	r2 := r
	r2.Weight = 1
	if l2 := mustAcquire(t, d, r2); l2.Token != l.Token {
		t.Errorf("re-acquire: token %d; want %d", l2.Token, l.Token)
	}
	if st := inspect(t, d, key); len(st.Holders) != 1 || st.Holders[0].Weight != 2 || st.Limit != 3 || st.Mode != driver.Shared {
		t.Errorf("after the re-acquire: %+v; want one holder of weight 2 of 3", st)
	}
	// Weight 1 still fits.
	l3 := mustAcquire(t, d, counted(key, owner(), 3, 1))
	for _, l := range []driver.Lease{l, l3} {
		if err := d.Release(ctxT(t), l); err != nil {
			t.Fatal(err)
		}
	}
	// Invalid counted requests are the front-end's to refuse (lockertest
	// and package locker's tests check that none reaches a driver).
}

// TestValues checks that a hold's value is reported by Inspect, kept by
// re-acquires and refreshes (and not changed by another driver's refused
// refresh), and gone with the
// hold.
func TestValues(t *testing.T) {
	a, b := newDriver(t), newDriver(t)
	key := plainKey("values")
	v1 := "leader 1\n\x00\xff"
	r := req(key, owner(), driver.Exclusive, 10*time.Second)
	r.Value = v1
	l := mustAcquire(t, a, r)
	check := func(what string, want ...string) {
		t.Helper()
		st := inspect(t, b, key)
		if len(st.Holders) != len(want) {
			t.Fatalf("%s: %+v; want %d holders", what, st, len(want))
		}
		for i, h := range st.Holders {
			if h.Value != want[i] {
				t.Errorf("%s: holder %d has value %q; want %q", what, i, h.Value, want[i])
			}
		}
	}
	check("granted", v1)
	r.Value = "leader 2"
	if l2 := mustAcquire(t, a, r); l2.Token != l.Token {
		t.Fatalf("re-acquire: token %d; want %d", l2.Token, l.Token)
	}
	check("re-acquired with another value", v1)
	if _, err := a.Refresh(ctxT(t), l); err != nil {
		t.Fatal(err)
	}
	for _, err := range a.RefreshBatch(ctxT(t), []driver.Lease{l}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Another Driver's Refresh is refused and leaves the hold as it is.
	if _, err := b.Refresh(ctxT(t), l); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Refresh through another driver: %v; want driver.ErrNotHeld", err)
	}
	for _, err := range b.RefreshBatch(ctxT(t), []driver.Lease{l}) {
		if !errors.Is(err, driver.ErrNotHeld) {
			t.Fatalf("RefreshBatch through another driver: %v; want driver.ErrNotHeld", err)
		}
	}
	if _, err := a.Refresh(ctxT(t), l); err != nil {
		t.Fatalf("Refresh after another driver's was refused: %v", err)
	}
	check("refreshed", v1)
	if st := inspect(t, b, key); st.Holders[0].Weight != 0 || st.Limit != 0 {
		t.Errorf("exclusive hold: %+v; want no weight or limit", st)
	}
	// A waiter's value, through its rewrites while it waits.
	w := req(key, owner(), driver.Exclusive, 10*time.Second)
	w.Value = strings.Repeat("w", driver.MaxValueLen)
	got := acquireBehind(t, b, a.Conn(), w)
	if err := a.Release(ctxT(t), l); err != nil {
		t.Fatal(err)
	}
	lw := <-got
	check("granted after waiting", w.Value)
	if err := b.Release(ctxT(t), lw); err != nil {
		t.Fatal(err)
	}
	check("released")

	testCountedValues(t, a, b, key, check)
}

// testCountedValues is TestValues for counted holds, each with its value,
// through the drivers a and b on key; check inspects key's holders.
func testCountedValues(t *testing.T, a, b *zkdriver.Driver, key string, check func(what string, want ...string)) {
	// Counted holds, each with its value.
	c1, c2 := counted(key, owner(), 3, 1), counted(key, owner(), 3, 2)
	c1.Value, c2.Value = "one", "two"
	l1, l2 := mustAcquire(t, a, c1), mustAcquire(t, b, c2)
	check("counted", "one", "two")
	st := inspect(t, a, key)
	if st.Limit != 3 || st.Mode != driver.Shared || st.Holders[0].Weight != 1 || st.Holders[1].Weight != 2 || st.Fence != l2.Token {
		t.Errorf("counted holds: %+v", st)
	}
	if err := a.Release(ctxT(t), l1); err != nil {
		t.Fatal(err)
	}
	check("one released", "two")
	if err := b.Release(ctxT(t), l2); err != nil {
		t.Fatal(err)
	}
	check("both released")
}

// TestCountedNoHerd checks with the server's own watch list (wchp) that
// counted waiters watch one lock node each (the head of the waiters the
// first node, each other waiter the one before it) and that at most two
// of them watch the key's children; then that all of them are served.
func TestCountedNoHerd(t *testing.T) {
	srv := server(t)
	if srv.External() {
		t.Skip("needs the four-letter word wchp")
	}
	const waiters = 6
	holder := newDriver(t)
	key := plainKey("semherd")
	hl := mustAcquire(t, holder, counted(key, owner(), 2, 2))
	w := newWaiters(t)
	ds := make([]*zkdriver.Driver, waiters)
	for i := range ds {
		ds[i] = newDriver(t)
		w.queue(i, ds[i], holder.Conn(), counted(key, owner(), 2, 1))
	}
	parent := zkdriver.DefaultRoot + "/" + key
	var watched map[string]int
	waitFor(t, 10*time.Second, "the waiters' watches", func() bool {
		out, err := zktest.FourLetter(srv.Addr, "wchp")
		if err != nil {
			t.Fatal(err)
		}
		watched = map[string]int{}
		path, total := "", 0
		for _, line := range strings.Split(out, "\n") {
			switch {
			case strings.HasPrefix(line, "/"):
				path = line
			case strings.HasPrefix(strings.TrimSpace(line), "0x") && strings.HasPrefix(path, parent+"/"):
				watched[path]++
				total++
			case strings.HasPrefix(strings.TrimSpace(line), "0x") && path == parent:
				watched[path]++
			}
		}
		return total == waiters
	})
	for p, n := range watched {
		if n > 2 || (p != parent && n > 1) {
			t.Errorf("%s has %d watchers", p, n)
		}
	}
	if err := holder.Release(ctxT(t), hl); err != nil {
		t.Fatal(err)
	}
	for range waiters {
		g := w.next()
		if err := ds[g.i].Release(ctxT(t), g.l); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "no nodes", func() bool { return len(lockNodes(t, holder.Conn(), key)) == 0 })
}
