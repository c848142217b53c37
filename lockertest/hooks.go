package lockertest

import (
	"context"
	"errors"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/internal/lag"
)

// A driverCall is one call of the driver under test, for the subtests that
// make every call while the backend misbehaves.
type driverCall struct {
	name string
	call func(ctx context.Context) error
}

// hookSetup makes the driver of a hook subtest: d holds held[0] and
// held[1], and another driver holds k2 (the blocker is released at the end
// of the subtest).
func (e *env) hookSetup() (d driver.Driver, held [2]driver.Lease, k2 string, other driver.Driver, blocker driver.Lease) {
	ds := e.drivers(2)
	d, other = ds[0], ds[1]
	k2 = e.key("contended")
	held[0], _ = e.acquire(d, req(e.key("held"), driver.Exclusive, e.long))
	held[1], _ = e.acquire(d, req(e.key("held-released"), driver.Exclusive, e.long))
	blocker, _ = e.acquire(other, req(k2, driver.Exclusive, e.long))
	return d, held, k2, other, blocker
}

// driverCalls returns every call d has, optional interfaces included: on
// held[0] (renewed) and held[1] (released: the front-end never renews a
// lease while it releases it), on k2 (which another driver holds) and on a
// key nobody holds. The requests they make are appended to *reqs, for
// their owners' cleanup.
func (e *env) driverCalls(d driver.Driver, leases [2]driver.Lease, k2 string, reqs *[]driver.Request) []driverCall {
	held := leases[0]
	fresh := e.key("fresh")
	try := func(f func(context.Context, driver.Request) (driver.Lease, error), key string) func(context.Context) error {
		r := req(key, driver.Exclusive, e.long)
		*reqs = append(*reqs, r)
		return func(ctx context.Context) error {
			_, err := f(ctx, r)
			return err
		}
	}
	calls := []driverCall{
		{"TryAcquire", try(d.TryAcquire, fresh)},
		{"Refresh", func(ctx context.Context) error { _, err := d.Refresh(ctx, held); return err }},
		{"Release", func(ctx context.Context) error { return d.Release(ctx, leases[1]) }},
	}
	if e.caps.Queue {
		queued := func(ctx context.Context, r driver.Request) (driver.Lease, error) { return tryQueued(ctx, d, r) }
		calls = append(calls, driverCall{"TryAcquire (Queued)", try(queued, k2)})
	}
	if e.caps.TokenFloor {
		calls = append(calls, driverCall{"TryAcquire (MinToken)", func(ctx context.Context) error {
			r := driver.Request{Key: held.Key, Owner: held.Owner, Mode: held.Mode, TTL: held.TTL, MinToken: held.Token}
			_, err := d.TryAcquire(ctx, r)
			return err
		}})
	}
	if a := claimed[driver.Acquirer](e, d); a != nil {
		calls = append(calls, driverCall{"Acquire", try(a.Acquire, k2)})
	}
	if b := claimed[driver.BatchRefresher](e, d); b != nil {
		calls = append(calls, driverCall{"RefreshBatch", func(ctx context.Context) error {
			return errors.Join(b.RefreshBatch(ctx, []driver.Lease{held})...)
		}})
	}
	if n := claimed[driver.Notifier](e, d); n != nil {
		calls = append(calls, driverCall{"Subscribe", func(ctx context.Context) error {
			s, err := n.Subscribe(ctx, fresh)
			if err == nil {
				s.Close()
			}
			return err
		}})
	}
	return calls
}

// closedBound is how soon a call on a driver whose client is closed must
// fail.
const closedBound = time.Second

// testDriverClosedClient checks, with the client under one driver closed
// (WithCloseClient), that every call of the driver fails promptly with a
// permanent error, and that an Acquire waiting when the client is closed
// returns with one too.
func testDriverClosedClient(e *env) {
	if e.opts.closeClient == nil {
		e.t.Skip("lockertest: no WithCloseClient hook: closed clients not checked")
	}
	d, held, k2, other, blocker := e.hookSetup()
	defer e.release(other, blocker)
	var waiting chan error
	if a := claimed[driver.Acquirer](e, d); a != nil {
		waiting = make(chan error, 1)
		go func() {
			_, err := a.Acquire(context.Background(), req(k2, driver.Exclusive, e.long))
			waiting <- err
		}()
		e.sleep(200 * time.Millisecond) // let it take its place in the queue
	}
	e.opts.closeClient(e.t, d)
	if waiting != nil {
		select {
		case err := <-waiting:
			if !driver.IsPermanent(err) || !errors.Is(err, driver.ErrClosed) {
				e.t.Errorf("an Acquire waiting when the client was closed returned %v; want a permanent error wrapping driver.ErrClosed", err)
			}
		case <-time.After(closedBound):
			e.t.Errorf("an Acquire waiting when the client was closed did not return within %v", closedBound)
		}
	}
	var reqs []driver.Request
	for _, c := range e.driverCalls(d, held, k2, &reqs) {
		ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
		start := time.Now()
		err := c.call(ctx)
		took := time.Since(start)
		cancel()
		if !driver.IsPermanent(err) || !errors.Is(err, driver.ErrClosed) {
			e.t.Errorf("%s on a closed client = %v; want an error wrapping driver.ErrClosed that driver.IsPermanent reports", c.name, err)
		}
		if took > closedBound {
			e.t.Errorf("%s on a closed client took %v; want at most %v", c.name, took, closedBound)
		}
	}
}

// stalledResult is what a driver call made while the backend was stalled
// returned, and how long it took.
type stalledResult struct {
	name string
	took time.Duration
	err  error
}

// checkStalledResults checks that every call made with a deadline while
// the backend did not answer returned the context's error within bound.
func checkStalledResults(e *env, got []stalledResult, deadline, bound time.Duration) {
	for _, r := range got {
		if !errors.Is(r.err, context.DeadlineExceeded) {
			e.t.Errorf("%s while the backend does not answer = %v; want an error wrapping context.DeadlineExceeded", r.name, r.err)
		}
		if r.took > bound {
			e.t.Errorf("%s with a %v deadline, the backend not answering, returned after %v; want at most %v (the deadline, %v, and twice the timer lateness of this machine meanwhile)", r.name, deadline, r.took, bound, lateness)
		}
	}
}

// releaseAbandoned releases, through d, what the abandoned calls of reqs
// may have left (a grant whose reply was lost, a queue entry), as the
// front-end's Release would remove it.
func releaseAbandoned(e *env, d driver.Driver, reqs []driver.Request) {
	for _, r := range reqs {
		if err := d.Release(e.ctx, driver.Lease{Key: r.Key, Owner: r.Owner, Mode: r.Mode, Abandoned: true}); err != nil && !errors.Is(err, driver.ErrNotHeld) {
			e.t.Errorf("Release of an abandoned call's owner once the backend answers: %v", err)
		}
	}
}

// testDriverStalled checks, with the backend not answering one driver
// (WithStall), that every call of the driver, and an Acquire that waited
// in the queue before, returns by its deadline with the context's error;
// and that the driver works again once the backend answers.
func testDriverStalled(e *env) {
	if e.opts.stall == nil {
		e.t.Skip("lockertest: no WithStall hook: deadlines with a backend that does not answer not checked")
	}
	d, held, k2, other, blocker := e.hookSetup()
	const deadline = 600 * time.Millisecond
	results := make(chan stalledResult, 16)
	run := func(c driverCall) {
		ctx, cancel := context.WithTimeout(e.ctx, deadline)
		defer cancel()
		start := time.Now()
		err := c.call(ctx)
		results <- stalledResult{c.name, time.Since(start), err}
	}
	var reqs []driver.Request
	calls := e.driverCalls(d, held, k2, &reqs)
	var queued *driver.Request
	if a := claimed[driver.Acquirer](e, d); a != nil {
		r := req(k2, driver.Exclusive, e.long)
		queued = &r
		reqs = append(reqs, r)
		// A waiter in the queue before the stall: its deadline passes
		// during it.
		calls = append(calls, driverCall{"Acquire (queued before the stall)", func(ctx context.Context) error {
			_, err := a.Acquire(ctx, r)
			return err
		}})
		go run(calls[len(calls)-1])
		calls = calls[:len(calls)-1]
		e.sleep(deadline / 3)
	}
	resume := e.opts.stall(e.t, d)
	probe := lag.Start()
	for _, c := range calls {
		go run(c)
	}
	n := len(calls)
	if queued != nil {
		n++
	}
	var got []stalledResult
	for range n {
		got = append(got, <-results)
	}
	checkStalledResults(e, got, deadline, probe.Bound(deadline, lateness))
	resume()
	releaseAbandoned(e, d, reqs)
	e.release(other, blocker)
	e.expectFree(e.driver(), k2, driver.Exclusive, "after the stall, once the abandoned waiter was released and the holder left")
	l, _ := e.acquire(d, req(e.key("after"), driver.Exclusive, e.long))
	e.release(d, l)
}
