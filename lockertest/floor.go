package lockertest

import (
	"errors"

	"github.com/go-locker/locker/driver"
)

// testTokenFloor checks Capabilities.TokenFloor (Request.MinToken): a
// holder's floor becomes its token (the request grants nothing new, and
// its lease has a token of at least the floor), a re-acquire returns it,
// the next grant after its release exceeds it, and a floor asked by an
// owner that does not hold the key fails with ErrNotHeld and leaves the
// key free. In each mode the driver grants.
func testTokenFloor(e *env) {
	e.skipUnless(e.caps.TokenFloor, "TokenFloor")
	ds := e.drivers(2)
	modes := []driver.Mode{driver.Exclusive}
	if e.sharer() {
		modes = append(modes, driver.Shared)
	}
	for _, mode := range modes {
		key := e.key(mode.String())
		r := req(key, mode, e.long)
		l, _ := e.acquire(ds[0], r)
		floor := l.Token + 1000
		fr := r
		fr.MinToken = floor
		got, err := ds[0].TryAcquire(e.ctx, fr)
		if err != nil {
			e.t.Fatalf("TryAcquire(%s) with MinToken %d by the holder: %v", fmtReq(r), floor, err)
		}
		if got.Key != r.Key || got.Owner != r.Owner || got.Mode != r.Mode || got.Token < floor {
			e.t.Errorf("TryAcquire(%s) with MinToken %d by the holder = %s; want the hold's lease with a token of at least %d", fmtReq(r), floor, fmtLease(got), floor)
		}
		again, err := ds[0].TryAcquire(e.ctx, r)
		if err != nil || again.Token != floor {
			e.t.Fatalf("re-acquire(%s) after MinToken %d = token %d, %v; want the floor", fmtReq(r), floor, again.Token, err)
		}
		e.release(ds[0], again)
		if next := e.expectFree(ds[1], key, driver.Exclusive, "after the release of a hold whose token took a floor"); next != 0 && next <= floor {
			e.t.Errorf("grant after the release of a hold with floor %d = token %d; want a greater token", floor, next)
		}

		nr := req(key, mode, e.long)
		nr.MinToken = floor + 1000
		if l, err := ds[1].TryAcquire(e.ctx, nr); !errors.Is(err, driver.ErrNotHeld) {
			e.t.Errorf("TryAcquire(%s) with MinToken %d by an owner that does not hold the key = %s, %v; want an error wrapping driver.ErrNotHeld", fmtReq(nr), nr.MinToken, fmtLease(l), err)
		}
		e.expectFree(ds[0], key, mode, "after a token floor asked by an owner that does not hold the key")
	}
}
