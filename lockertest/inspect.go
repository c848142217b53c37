package lockertest

import (
	"context"
	"errors"
	"time"

	"github.com/go-locker/locker/driver"
)

// testInspect checks driver.Inspector: Inspect reports the holders of a
// key with their owners, tokens and remaining TTL, the fence and the wait
// queue, and changes nothing; ForceRelease ends every hold of the key,
// whoever owns it, keeps the fence counter, and wakes a waiter.
func testInspect(e *env) {
	e.skipUnless(e.caps.Inspect, "Inspect")
	in := claimed[driver.Inspector](e, e.d)
	ds := e.drivers(3)
	key := e.key("k")

	if st := e.inspect(in, key); len(st.Holders) != 0 || st.Waiting != 0 {
		e.t.Errorf("Inspect of a key never locked = %+v; want no holders and no waiters", st)
	}
	n, err := in.ForceRelease(e.ctx, key)
	if err != nil || n != 0 {
		e.t.Errorf("ForceRelease of a free key = %d, %v; want 0, nil", n, err)
	}

	// An exclusive hold, seen through another client.
	r := req(key, driver.Exclusive, e.long)
	l, _ := e.acquire(ds[1], r)
	st := e.inspect(in, key)
	if len(st.Holders) != 1 || st.Mode != driver.Exclusive {
		e.t.Fatalf("Inspect of an exclusively held key = %+v; want one exclusive holder", st)
	}
	h := st.Holders[0]
	if h.Owner != r.Owner || h.Token != l.Token {
		e.t.Errorf("Inspect holder = %+v; want owner %s and token %d", h, r.Owner, l.Token)
	}
	if h.Remaining < 0 || h.Remaining > grantedTTL(r, l)+time.Second {
		e.t.Errorf("Inspect holder's remaining TTL = %v; want within [0, %v]", h.Remaining, grantedTTL(r, l))
	}
	if st.Fence != 0 && st.Fence < l.Token {
		e.t.Errorf("Inspect fence = %d below the holder's token %d", st.Fence, l.Token)
	}
	// Inspect changed nothing: the owner still refreshes.
	e.refresh(ds[1], l)

	// Forced release: the owner no longer holds, the next grant has a
	// greater token.
	if n, err := in.ForceRelease(e.ctx, key); err != nil || n != 1 {
		e.t.Fatalf("ForceRelease of an exclusively held key = %d, %v; want 1, nil", n, err)
	}
	e.refreshNotHeld("Refresh after ForceRelease", ds[1], l)
	if st := e.inspect(in, key); len(st.Holders) != 0 {
		e.t.Errorf("Inspect after ForceRelease = %+v; want no holders", st)
	}
	l2, _ := e.acquire(ds[2], req(key, driver.Exclusive, e.long))
	if l2.Token <= l.Token {
		e.t.Errorf("grant after ForceRelease has token %d after %d; want a greater token", l2.Token, l.Token)
	}
	e.release(ds[2], l2)

	if e.sharer() {
		testInspectShared(e, in, ds)
	}
	if e.caps.Acquire {
		testInspectWaiter(e, in, ds)
	} else if e.caps.Queue {
		testInspectQueued(e, in, ds)
	}

	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	if _, err := in.Inspect(ctx, key); !errors.Is(err, context.Canceled) {
		e.t.Errorf("Inspect with a cancelled context: %v; want an error wrapping context.Canceled", err)
	}
	if _, err := in.ForceRelease(ctx, key); !errors.Is(err, context.Canceled) {
		e.t.Errorf("ForceRelease with a cancelled context: %v; want an error wrapping context.Canceled", err)
	}
}

// testInspectShared: shared holders are listed by token; ForceRelease ends
// them all.
func testInspectShared(e *env, in driver.Inspector, ds []driver.Driver) {
	key := e.key("shared")
	la, _ := e.acquire(ds[1], req(key, driver.Shared, e.long))
	lb, _ := e.acquire(ds[2], req(key, driver.Shared, e.long))
	st := e.inspect(in, key)
	if st.Mode != driver.Shared || len(st.Holders) != 2 ||
		st.Holders[0].Owner != la.Owner || st.Holders[0].Token != la.Token ||
		st.Holders[1].Owner != lb.Owner || st.Holders[1].Token != lb.Token {
		e.t.Errorf("Inspect of a key with two readers = %+v; want them both, shared, by token (%d, %d)", st, la.Token, lb.Token)
	}
	if n, err := in.ForceRelease(e.ctx, key); err != nil || n != 2 {
		e.t.Errorf("ForceRelease of two readers = %d, %v; want 2, nil", n, err)
	}
	for i, l := range []driver.Lease{la, lb} {
		e.refreshNotHeld("Refresh of a reader after ForceRelease", ds[i+1], l)
	}
}

// testInspectWaiter: a waiter in the backend's queue (Acquirer) is
// counted, and ForceRelease lets it have the key.
func testInspectWaiter(e *env, in driver.Inspector, ds []driver.Driver) {
	key := e.key("waiter")
	l, _ := e.acquire(ds[1], req(key, driver.Exclusive, e.long))
	rw := req(key, driver.Exclusive, e.long)
	got := make(chan grant, 1)
	go func() {
		l, err := claimed[driver.Acquirer](e, ds[2]).Acquire(e.ctx, rw)
		got <- grant{l: l, err: err}
	}()
	deadline := time.Now().Add(notifyWait)
	for e.inspect(in, key).Waiting < 1 {
		if time.Now().After(deadline) {
			e.t.Errorf("Inspect never counted the waiter of Acquire in %v", notifyWait)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n, err := in.ForceRelease(e.ctx, key); err != nil || n != 1 {
		e.t.Errorf("ForceRelease with a waiter = %d, %v; want 1, nil", n, err)
	}
	select {
	case g := <-got:
		if g.err != nil {
			e.t.Fatalf("Acquire after ForceRelease: %v", g.err)
		}
		if g.l.Token <= l.Token {
			e.t.Errorf("waiter granted token %d after %d; want a greater token", g.l.Token, l.Token)
		}
		e.release(ds[2], g.l)
	case <-time.After(notifyWait):
		e.t.Fatalf("the waiter of Acquire was not granted the key within %v of ForceRelease", notifyWait)
	}
}

// testInspectQueued: an entry of the backend's wait queue (Request.Queued) is
// counted.
func testInspectQueued(e *env, in driver.Inspector, ds []driver.Driver) {
	key := e.key("queued")
	l, _ := e.acquire(ds[1], req(key, driver.Exclusive, e.long))
	rq := req(key, driver.Exclusive, e.long)
	if _, err := tryQueued(e.ctx, ds[2], rq); !errors.Is(err, driver.ErrLocked) {
		e.t.Fatalf("queued TryAcquire of a held key: %v; want an error wrapping driver.ErrLocked", err)
	}
	if st := e.inspect(in, key); st.Waiting != 1 || len(st.Holders) != 1 {
		e.t.Errorf("Inspect with one holder and one queued owner = %+v; want 1 holder and Waiting 1", st)
	}
	e.release(ds[1], l)
	// The queued owner leaves the queue (or gives up a handoff).
	if err := ds[2].Release(e.ctx, driver.Lease{Key: key, Owner: rq.Owner, Mode: rq.Mode, Abandoned: true}); err != nil && !errors.Is(err, driver.ErrNotHeld) {
		e.t.Errorf("Release of the queued owner: %v", err)
	}
}

func (e *env) inspect(in driver.Inspector, key string) driver.KeyState {
	e.t.Helper()
	st, err := in.Inspect(e.ctx, key)
	if err != nil {
		e.t.Fatalf("Inspect(%q): %v", key, err)
	}
	return st
}
