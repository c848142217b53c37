package lockertest

import (
	"context"
	"errors"
	"time"

	"github.com/go-locker/locker"
)

// testMinHold checks locker.WithMinHold on the driver: a hold released
// at once, and a hold ended by Client.Close, keep the key from other
// Clients until the minimum hold has passed since the lock call began
// (a TryAcquire that returns before then is refused), and the key is
// granted to a waiter soon after. Close returns without waiting for it.
func testMinHold(e *env) {
	d := min(e.medium, e.long/2) // within the TTL less the safety margin
	cs := e.clients(2)
	other := cs[1].Mutex(e.key("released"))

	start := time.Now()
	h, err := cs[0].Mutex(e.key("released"), locker.WithMinHold(d)).Acquire(e.ctx)
	if err != nil {
		e.t.Fatalf("Mutex.Acquire with WithMinHold(%v): %v", d, err)
	}
	if err := h.Release(e.ctx); err != nil {
		e.t.Fatalf("Hold.Release before the minimum hold: %v; want nil", err)
	}
	e.expectKept(other, start, d, "released")

	// Client.Close neither releases the key before the minimum hold nor
	// waits for it.
	c := locker.New(e.driver(), locker.WithTTL(e.long), locker.WithMinHold(d))
	key := e.key("closed")
	start = time.Now()
	if _, err := c.Mutex(key).Acquire(e.ctx); err != nil {
		e.t.Fatalf("Mutex.Acquire: %v", err)
	}
	if err := c.Close(e.ctx); err != nil {
		e.t.Fatalf("Client.Close: %v", err)
	}
	if el := time.Since(start); el >= d {
		e.inconclusive("the acquire and Close took " + el.String() + ", longer than the minimum hold")
	}
	e.expectKept(cs[1].Mutex(key), start, d, "ended by Client.Close")
}

// expectKept checks that m cannot take its key before start+d, and takes
// it once the minimum hold d, begun at start, has passed.
func (e *env) expectKept(m *locker.Mutex, start time.Time, d time.Duration, how string) {
	e.t.Helper()
	h, err := m.TryAcquire(e.ctx)
	switch returned := time.Now(); {
	case err == nil:
		h.Release(e.ctx)
		if returned.Before(start.Add(d)) {
			e.t.Errorf("another Client got the key of a hold %s %v after the lock call began, within its minimum hold of %v", how, returned.Sub(start), d)
		}
	case !errors.Is(err, locker.ErrLocked):
		e.t.Fatalf("Mutex.TryAcquire during the minimum hold: %v; want an error wrapping ErrLocked", err)
	}
	ctx, cancel := context.WithTimeout(e.ctx, d+budget/3)
	defer cancel()
	if err := m.LockContext(ctx); err != nil {
		e.t.Fatalf("Mutex.LockContext after a hold %s with a minimum hold of %v: %v; want the key once it passed", how, d, err)
	}
	if got := time.Since(start); got < d {
		e.t.Errorf("another Client got the key of a hold %s %v after the lock call began, within its minimum hold of %v", how, got, d)
	}
	if err := m.UnlockContext(e.ctx); err != nil {
		e.t.Errorf("Mutex.UnlockContext: %v", err)
	}
}
