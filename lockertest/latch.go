package lockertest

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
)

// latchRounds is how many times testLeaderLatch makes its leader resign.
const latchRounds = 4

// testLeaderLatch checks locker.LeaderLatch on the driver: latches on
// three Clients never lead at once (each newly elected latch finds the
// others' IsLeader false, as a resigning leader turns its own false before
// it resigns), and each term is above the last; a leader whose leadership
// is taken away (Inspector.ForceRelease) is ousted with ErrLost, reports
// IsLeader false from the moment its Hold ends, and campaigns again until
// it is re-elected with a greater term.
func testLeaderLatch(e *env) {
	e.skipUnlessElections()
	e.latchHandoff()
	e.latchLoss()
}

// latchHandoff runs latches on three Clients and makes the leader resign,
// latchRounds times, starting a new latch in its place each time.
func (e *env) latchHandoff() {
	cs := e.clients(3)
	key := e.key("k")
	var (
		mu      sync.Mutex
		latches = make([]*locker.LeaderLatch, len(cs))
		cancels = make([]context.CancelFunc, len(cs))
		term    locker.Token
		terms   int
	)
	elected := make(chan int, 2*latchRounds+len(cs))
	start := func(i int) {
		ctx, cancel := context.WithCancel(e.ctx)
		var l *locker.LeaderLatch
		onElected := func(h *locker.Hold) {
			mu.Lock()
			defer mu.Unlock()
			for j, o := range latches {
				if o != nil && o != l && o.IsLeader() {
					e.errorf("latch %d elected (term %d) while latch %d still reports IsLeader", i, h.Token(), j)
				}
			}
			if h.Token() <= term {
				e.errorf("latch %d elected with term %d, not above the last term %d", i, h.Token(), term)
			}
			term = h.Token()
			terms++
			elected <- i
		}
		mu.Lock() // l is set before onElected reads it
		defer mu.Unlock()
		var err error
		l, err = cs[i].Election(key).Latch(ctx, "latch", locker.OnElected(onElected))
		if err != nil {
			cancel()
			e.t.Fatalf("Election.Latch: %v", err)
		}
		latches[i], cancels[i] = l, cancel
	}
	for i := range cs {
		start(i)
	}
	defer func() {
		for _, cancel := range cancels {
			cancel()
		}
		for _, l := range latches {
			<-l.Done()
		}
	}()
	for round := 0; round <= latchRounds; round++ {
		var i int
		select {
		case i = <-elected:
		case <-time.After(budget / 3):
			e.t.Fatalf("round %d: no latch was elected within %v", round, budget/3)
		}
		mu.Lock()
		l, cancel := latches[i], cancels[i]
		mu.Unlock()
		if !l.IsLeader() || l.Leadership() == nil {
			e.t.Fatalf("latch %d: IsLeader %v, Leadership %v after OnElected; want true and its Hold", i, l.IsLeader(), l.Leadership())
		}
		if round == latchRounds {
			break
		}
		cancel()
		select {
		case <-l.Done():
		case <-time.After(budget / 3):
			e.t.Fatalf("latch %d still running %v after its context ended", i, budget/3)
		}
		if l.IsLeader() {
			e.t.Errorf("latch %d reports IsLeader after it stopped", i)
		}
		if err := l.Err(); !errors.Is(err, context.Canceled) {
			e.t.Errorf("LeaderLatch.Err after its context was cancelled = %v; want an error wrapping context.Canceled", err)
		}
		start(i)
	}
	mu.Lock()
	defer mu.Unlock()
	e.t.Logf("%d terms, the last %d", terms, term)
	if terms != latchRounds+1 {
		e.t.Errorf("%d terms for %d resignations; want %d", terms, latchRounds, latchRounds+1)
	}
}

// latchLoss takes the leadership away from a latch behind its back and
// checks that it notices, reports it, and is elected again.
func (e *env) latchLoss() {
	in := e.driver().(driver.Inspector)
	// Renewal errors after the loss are expected: no error handler.
	c := e.clients(1, locker.WithTTL(e.medium), locker.WithErrorHandler(func(error) {}))[0]
	key := e.key("lost")
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	elected := make(chan *locker.Hold, 4)
	ousted := make(chan error, 4)
	var (
		l   *locker.LeaderLatch
		err error
		mu  sync.Mutex // l is set before OnOusted reads it
	)
	mu.Lock()
	l, err = c.Election(key).Latch(ctx, "latch",
		locker.OnElected(func(h *locker.Hold) { elected <- h }),
		locker.OnOusted(func(err error) {
			mu.Lock()
			defer mu.Unlock()
			if l.IsLeader() {
				e.errorf("IsLeader true in OnOusted")
			}
			ousted <- err
		}))
	mu.Unlock()
	if err != nil {
		e.t.Fatalf("Election.Latch: %v", err)
	}
	wait := 2*e.medium + expiryGrace
	var h1 *locker.Hold
	select {
	case h1 = <-elected:
	case <-time.After(budget / 3):
		e.t.Fatalf("a lone latch was not elected within %v", budget/3)
	}
	if n, err := in.ForceRelease(e.ctx, key); err != nil || n < 1 {
		e.t.Fatalf("Inspector.ForceRelease of the leader's key = %d, %v; want at least 1, nil", n, err)
	}
	select {
	case <-h1.Done():
	case <-time.After(wait):
		e.t.Fatalf("the leader did not learn of its loss within %v (TTL %v)", wait, e.medium)
	}
	// From the moment the Hold ends, the latch does not lead by it.
	if h := l.Leadership(); h == h1 || (h != nil && h.Token() <= h1.Token()) {
		e.t.Errorf("Leadership after the loss is the lost term %d", h1.Token())
	}
	select {
	case err := <-ousted:
		if !errors.Is(err, locker.ErrLost) {
			e.t.Errorf("OnOusted(%v) after the leadership was taken away; want an error wrapping ErrLost", err)
		}
	case <-time.After(wait):
		e.t.Fatalf("OnOusted not called within %v of the loss", wait)
	}
	select {
	case h2 := <-elected:
		if h2.Token() <= h1.Token() {
			e.t.Errorf("re-elected with term %d, not above the lost term %d", h2.Token(), h1.Token())
		}
		if !l.IsLeader() {
			e.t.Errorf("IsLeader false after re-election")
		}
		e.t.Logf("term %d lost, re-elected with term %d", h1.Token(), h2.Token())
	case <-time.After(budget / 3):
		e.t.Fatalf("the latch was not re-elected within %v of its loss", budget/3)
	}
	cancel()
	<-l.Done()
	select {
	case err := <-ousted:
		if err != nil {
			e.t.Errorf("OnOusted(%v) when the latch's context ended; want nil", err)
		}
	default:
		e.t.Errorf("OnOusted not called when the latch resigned at the end of its context")
	}
	e.expectFree(e.driver(), key, driver.Exclusive, "after the latch stopped")
}
