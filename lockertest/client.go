package lockertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/internal/lag"
)

// revocable is a driver that can take a lease away from its holder, as an
// administrator (or an expiry the holder did not see) would: revoke
// releases the key's leases through the driver itself, so that the holder
// learns of the loss from its next renewal, whatever the backend. It has
// only the methods of driver.Driver.
type revocable struct {
	d      driver.Driver
	mu     sync.Mutex
	leases map[string][]driver.Lease
}

func (r *revocable) TryAcquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	l, err := r.d.TryAcquire(ctx, req)
	if err == nil {
		r.mu.Lock()
		r.leases[req.Key] = append(r.leases[req.Key], l)
		r.mu.Unlock()
	}
	return l, err
}

func (r *revocable) Refresh(ctx context.Context, l driver.Lease) (driver.Lease, error) {
	return r.d.Refresh(ctx, l)
}

func (r *revocable) Release(ctx context.Context, l driver.Lease) error {
	return r.d.Release(ctx, l)
}

// revoke releases every lease of key granted through r.
func (r *revocable) revoke(ctx context.Context, key string) error {
	r.mu.Lock()
	ls := r.leases[key]
	delete(r.leases, key)
	r.mu.Unlock()
	var errs []error
	for _, l := range ls {
		if err := r.d.Release(ctx, l); err != nil && !errors.Is(err, driver.ErrNotHeld) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// testLossRule checks the rule every driver follows through package
// locker: a lost hold frees the key for the other lock calls of the
// process at once, while the handle that lost it still needs its Unlock,
// which reports the loss.
func testLossRule(e *env) {
	key := e.key("k")
	r := &revocable{d: e.d, leases: make(map[string][]driver.Lease)}
	c := locker.New(r, locker.WithTTL(e.medium), locker.WithErrorHandler(func(error) {}))
	defer c.Close(e.ctx)
	m := c.Mutex(key)
	if err := m.LockContext(e.ctx); err != nil {
		e.t.Fatalf("Mutex.LockContext: %v", err)
	}
	if err := r.revoke(e.ctx, key); err != nil {
		e.t.Fatalf("revoking the hold through the driver: %v", err)
	}
	select {
	case <-m.Done():
	case <-time.After(2 * e.medium):
		e.t.Fatalf("a Mutex whose lease was released behind its back did not learn of the loss within %v (TTL %v)", 2*e.medium, e.medium)
	}
	if err := m.Err(); !errors.Is(err, locker.ErrLost) {
		e.t.Errorf("Mutex.Err() after the loss = %v; want an error wrapping ErrLost", err)
	}
	ctx, cancel := context.WithTimeout(e.ctx, e.medium)
	defer cancel()
	other := c.Mutex(key)
	if err := other.LockContext(ctx); err != nil {
		e.t.Fatalf("another Mutex of the same Client on a key whose holder lost it = %v; want the key at once, without waiting for the lost handle's Unlock", err)
	}
	if err := other.UnlockContext(e.ctx); err != nil {
		e.t.Errorf("Mutex.UnlockContext: %v", err)
	}
	ctx2, cancel2 := context.WithTimeout(e.ctx, 300*time.Millisecond)
	defer cancel2()
	if err := m.LockContext(ctx2); !errors.Is(err, context.DeadlineExceeded) {
		e.t.Errorf("a second LockContext on the handle that lost its hold, before its Unlock = %v; want it to wait (DeadlineExceeded), as sync.Mutex does", err)
		if err == nil {
			m.Unlock()
		}
	}
	if err := m.UnlockContext(e.ctx); !errors.Is(err, locker.ErrLost) {
		e.t.Errorf("Mutex.UnlockContext after the loss = %v; want an error wrapping ErrLost", err)
	}
	if err := m.LockContext(e.ctx); err != nil {
		e.t.Fatalf("Mutex.LockContext after the lost hold's Unlock: %v", err)
	}
	if err := m.UnlockContext(e.ctx); err != nil {
		e.t.Errorf("Mutex.UnlockContext: %v", err)
	}
	e.expectFree(e.driver(), key, driver.Exclusive, "after the handles were unlocked")
}

// testClientClose checks that Client.Close ends and releases every hold,
// ends the calls that wait, and makes later calls fail with ErrClosed.
func testClientClose(e *env) {
	ds := e.drivers(2)
	keys := []string{e.key("a"), e.key("b"), e.key("busy")}
	hl, _ := e.acquire(ds[1], req(keys[2], driver.Exclusive, e.long))
	c := locker.New(ds[0], locker.WithTTL(e.long))
	m := c.Mutex(keys[0])
	if err := m.LockContext(e.ctx); err != nil {
		e.t.Fatalf("Mutex.LockContext: %v", err)
	}
	h, err := c.Mutex(keys[1]).Acquire(e.ctx)
	if err != nil {
		e.t.Fatalf("Mutex.Acquire: %v", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- c.Mutex(keys[2]).LockContext(e.ctx) }()
	e.sleep(100 * time.Millisecond)
	if err := c.Close(e.ctx); err != nil {
		e.t.Errorf("Client.Close: %v", err)
	}
	for _, ch := range []<-chan struct{}{m.Done(), h.Done(), h.Context().Done()} {
		select {
		case <-ch:
		default:
			e.t.Errorf("a hold's Done channel is open after Client.Close")
		}
	}
	if err := h.Err(); !errors.Is(err, locker.ErrClosed) {
		e.t.Errorf("Hold.Err() after Client.Close = %v; want an error wrapping ErrClosed", err)
	}
	select {
	case err := <-waited:
		if !errors.Is(err, locker.ErrClosed) {
			e.t.Errorf("a LockContext waiting during Client.Close = %v; want an error wrapping ErrClosed", err)
		}
	case <-time.After(e.medium):
		e.t.Fatalf("a LockContext waiting during Client.Close did not return within %v", e.medium)
	}
	if err := c.Mutex(keys[0]).LockContext(e.ctx); !errors.Is(err, locker.ErrClosed) {
		e.t.Errorf("LockContext after Client.Close = %v; want an error wrapping ErrClosed", err)
	}
	if err := m.UnlockContext(e.ctx); !errors.Is(err, locker.ErrClosed) {
		e.t.Errorf("Mutex.UnlockContext after Client.Close = %v; want an error wrapping ErrClosed", err)
	}
	e.expectFree(ds[1], keys[0], driver.Exclusive, "after Client.Close (Close must release the holds it ends)")
	e.expectFree(ds[1], keys[1], driver.Exclusive, "after Client.Close (Close must release the holds it ends)")
	e.release(ds[1], hl)
	e.expectFree(ds[1], keys[2], driver.Exclusive, "after Client.Close ended a waiter and the holder released")
}

// lateness is how much later than its deadline a call may return, beyond
// twice the timer lateness that a loaded machine shows meanwhile (see
// internal/lag).
const lateness = 50 * time.Millisecond

// testDeadlines checks, with the backend stalled for one driver, that
// locker's calls through it return by their deadline.
func testDeadlines(e *env) {
	if e.opts.stall == nil {
		e.t.Skip("lockertest: no WithStall hook: deadlines with a backend that does not answer not checked")
	}
	ds := e.drivers(2)
	c := locker.New(ds[0], locker.WithTTL(e.long), locker.WithErrorHandler(func(error) {}))
	defer func() {
		if err := c.Close(e.ctx); err != nil {
			e.t.Errorf("Client.Close after the backend came back: %v", err)
		}
	}()
	const deadline = 600 * time.Millisecond
	timed := e.timedStalled

	free := e.key("free")
	resume := e.opts.stall(e.t, ds[0])
	timed("LockContext with a 600ms deadline on a free key", func() error {
		ctx, cancel := context.WithTimeout(e.ctx, deadline)
		defer cancel()
		return c.Mutex(free).LockContext(ctx)
	}, context.DeadlineExceeded, deadline)
	timed("TryLock (try timeout 600ms)", func() error {
		if c.Mutex(free, locker.WithTryTimeout(deadline)).TryLock() {
			return errors.New("TryLock succeeded")
		}
		return nil
	}, nil, deadline)
	resume()

	held := e.key("held")
	hl, _ := e.acquire(ds[1], req(held, driver.Exclusive, e.long))
	timed("LockContext with a 600ms deadline while waiting for a held key", func() error {
		ctx, cancel := context.WithTimeout(e.ctx, deadline)
		defer cancel()
		stalled := make(chan func(), 1)
		time.AfterFunc(deadline/3, func() { stalled <- e.opts.stall(e.t, ds[0]) })
		defer func() { (<-stalled)() }()
		return c.Mutex(held).LockContext(ctx)
	}, context.DeadlineExceeded, deadline)
	e.release(ds[1], hl)
	checkRelockAfterStall(e, c, ds[1], free, held)
}

// timedStalled checks that f, a call made with the backend stalled,
// returns an error wrapping want (unless want is nil) within limit plus
// the timer lateness of this machine meanwhile.
func (e *env) timedStalled(what string, f func() error, want error, limit time.Duration) {
	e.t.Helper()
	// A loaded machine may be late once; twice is the call's fault.
	var el, bound time.Duration
	for range 2 {
		probe := lag.Start()
		start := time.Now()
		err := f()
		el = time.Since(start)
		bound = probe.Bound(limit, lateness)
		if want != nil && !errors.Is(err, want) {
			e.t.Errorf("%s with the backend stalled = %v; want an error wrapping %v", what, err, want)
			return
		}
		if el <= bound {
			return
		}
	}
	e.t.Errorf("%s with the backend stalled returned after %v, twice; want at most %v (the deadline, %v, and twice the timer lateness of this machine meanwhile)", what, el, bound, lateness)
}

// checkRelockAfterStall checks that what the abandoned calls left is
// cleaned up once the backend answers again; the Client's next lock calls
// for the keys wait for that, and get them well before what was left
// could expire: a cleanup that gave up after one failed try would leave a
// queue entry blocking the key for its TTL. d, another driver, checks
// that each key is free afterwards.
func checkRelockAfterStall(e *env, c *locker.Client, d driver.Driver, keys ...string) {
	for _, k := range keys {
		m := c.Mutex(k)
		ctx, cancel := context.WithTimeout(e.ctx, e.long/2)
		err := m.LockContext(ctx)
		cancel()
		if err != nil {
			e.t.Fatalf("LockContext of %q once the backend answers again, within half the TTL (%v) of what the abandoned calls left: %v", k, e.long/2, err)
		}
		if err := m.UnlockContext(e.ctx); err != nil {
			e.t.Errorf("UnlockContext: %v", err)
		}
		e.expectFree(d, k, driver.Exclusive, fmt.Sprintf("after calls abandoned while the backend was stalled, and a later Lock and Unlock of %q", k))
	}
}

// testClosedClient checks that a closed backend client is a permanent
// error for the driver and for package locker.
func testClosedClient(e *env) {
	if e.opts.closeClient == nil {
		e.t.Skip("lockertest: no WithCloseClient hook: closed clients not checked")
	}
	d := e.driver()
	key := e.key("k")
	c := locker.New(d, locker.WithTTL(e.medium), locker.WithErrorHandler(func(error) {}))
	m := c.Mutex(key)
	if err := m.LockContext(e.ctx); err != nil {
		e.t.Fatalf("Mutex.LockContext: %v", err)
	}
	e.opts.closeClient(e.t, d)
	const prompt = time.Second
	call := func(what string, f func(ctx context.Context) error) {
		e.t.Helper()
		ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
		defer cancel()
		start := time.Now()
		err := f(ctx)
		if el := time.Since(start); el > prompt {
			e.t.Errorf("%s on a closed client took %v; want at most %v", what, el, prompt)
		}
		if !driver.IsPermanent(err) || !errors.Is(err, driver.ErrClosed) {
			e.t.Errorf("%s on a closed client = %v; want an error wrapping driver.ErrClosed that driver.IsPermanent reports", what, err)
		}
	}
	r := req(e.key("other"), driver.Exclusive, e.long)
	call("Mutex.LockContext", func(ctx context.Context) error { return c.Mutex(r.Key).LockContext(ctx) })
	func() {
		defer func() {
			if recover() == nil {
				e.t.Errorf("Mutex.Lock on a closed client returned; want a panic with the permanent error")
			}
		}()
		c.Mutex(r.Key).Lock()
	}()
	select {
	case <-m.Done():
	case <-time.After(2 * e.medium):
		e.t.Errorf("a hold whose client was closed is still held %v later (TTL %v)", 2*e.medium, e.medium)
	}
	m.Unlock() // no panic: the hold ended, its handle is still locked
	ctx, cancel := context.WithTimeout(e.ctx, prompt)
	defer cancel()
	_ = c.Close(ctx) // the releases fail: the client is closed
}
