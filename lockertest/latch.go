package lockertest

import (
	"context"
	"errors"
	"slices"
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

// latchPool is the state of latchHandoff: a latch per Client, restarted
// after each resignation, and the terms they were elected with.
type latchPool struct {
	e       *env
	cs      []*locker.Client
	key     string
	elected chan int // the index of each latch elected

	mu      sync.Mutex
	latches []*locker.LeaderLatch
	cancels []context.CancelFunc
	term    locker.Token // the last
	terms   int
}

// start starts latch i, on Client i.
func (p *latchPool) start(i int) {
	e := p.e
	ctx, cancel := context.WithCancel(e.ctx)
	var l *locker.LeaderLatch
	onElected := func(h *locker.Hold) {
		p.mu.Lock()
		defer p.mu.Unlock()
		for j, o := range p.latches {
			if o != nil && o != l && o.IsLeader() {
				e.errorf("latch %d elected (term %d) while latch %d still reports IsLeader", i, h.Token(), j)
			}
		}
		if h.Token() <= p.term {
			e.errorf("latch %d elected with term %d, not above the last term %d", i, h.Token(), p.term)
		}
		p.term = h.Token()
		p.terms++
		p.elected <- i
	}
	p.mu.Lock() // l is set before onElected reads it
	defer p.mu.Unlock()
	var err error
	l, err = p.cs[i].Election(p.key).Latch(ctx, "latch", locker.OnElected(onElected))
	if err != nil {
		cancel()
		e.t.Fatalf("Election.Latch: %v", err)
	}
	p.latches[i], p.cancels[i] = l, cancel
}

// stop stops every latch and waits for them.
func (p *latchPool) stop() {
	p.mu.Lock() // not held while waiting: OnElected takes it
	latches, cancels := slices.Clone(p.latches), slices.Clone(p.cancels)
	p.mu.Unlock()
	for i, cancel := range cancels {
		if cancel != nil {
			cancel()
			<-latches[i].Done()
		}
	}
}

// next waits for the next election and returns the latch elected and the
// function that stops it.
func (p *latchPool) next(round int) (int, *locker.LeaderLatch, context.CancelFunc) {
	var i int
	select {
	case i = <-p.elected:
	case <-time.After(budget / 3):
		p.e.t.Fatalf("round %d: no latch was elected within %v", round, budget/3)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return i, p.latches[i], p.cancels[i]
}

// latchHandoff runs latches on three Clients and makes the leader resign,
// latchRounds times, starting a new latch in its place each time.
func (e *env) latchHandoff() {
	cs := e.clients(3)
	p := &latchPool{e: e, cs: cs, key: e.key("k"), elected: make(chan int, 2*latchRounds+len(cs)),
		latches: make([]*locker.LeaderLatch, len(cs)), cancels: make([]context.CancelFunc, len(cs))}
	for i := range cs {
		p.start(i)
	}
	defer p.stop()
	for round := 0; round <= latchRounds; round++ {
		i, l, cancel := p.next(round)
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
		p.start(i)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e.t.Logf("%d terms, the last %d", p.terms, p.term)
	if p.terms != latchRounds+1 {
		e.t.Errorf("%d terms for %d resignations; want %d", p.terms, latchRounds, latchRounds+1)
	}
}

// watchedLatch is a latch whose changes are sent on channels.
type watchedLatch struct {
	*locker.LeaderLatch
	elected chan *locker.Hold
	ousted  chan error
}

// watchLatch starts a latch on c for key, checking that IsLeader is false
// whenever it is ousted.
func (e *env) watchLatch(ctx context.Context, c *locker.Client, key string) *watchedLatch {
	w := &watchedLatch{elected: make(chan *locker.Hold, 4), ousted: make(chan error, 4)}
	var mu sync.Mutex // w.LeaderLatch is set before OnOusted reads it
	mu.Lock()
	defer mu.Unlock()
	l, err := c.Election(key).Latch(ctx, "latch",
		locker.OnElected(func(h *locker.Hold) { w.elected <- h }),
		locker.OnOusted(func(err error) {
			mu.Lock()
			defer mu.Unlock()
			if w.IsLeader() {
				e.errorf("IsLeader true in OnOusted")
			}
			w.ousted <- err
		}))
	if err != nil {
		e.t.Fatalf("Election.Latch: %v", err)
	}
	w.LeaderLatch = l
	return w
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
	l := e.watchLatch(ctx, c, key)
	wait := 2*e.medium + expiryGrace
	h1 := e.nextLeadership(l, "a lone latch was not elected")
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
	case err := <-l.ousted:
		if !errors.Is(err, locker.ErrLost) {
			e.t.Errorf("OnOusted(%v) after the leadership was taken away; want an error wrapping ErrLost", err)
		}
	case <-time.After(wait):
		e.t.Fatalf("OnOusted not called within %v of the loss", wait)
	}
	h2 := e.nextLeadership(l, "the latch was not re-elected after its loss")
	if h2.Token() <= h1.Token() {
		e.t.Errorf("re-elected with term %d, not above the lost term %d", h2.Token(), h1.Token())
	}
	e.t.Logf("term %d lost, re-elected with term %d", h1.Token(), h2.Token())
	cancel()
	<-l.Done()
	select {
	case err := <-l.ousted:
		if err != nil {
			e.t.Errorf("OnOusted(%v) when the latch's context ended; want nil", err)
		}
	default:
		e.t.Errorf("OnOusted not called when the latch resigned at the end of its context")
	}
	e.expectFree(e.driver(), key, driver.Exclusive, "after the latch stopped")
}

// nextLeadership waits for l's next election, and fails with what
// otherwise.
func (e *env) nextLeadership(l *watchedLatch, what string) *locker.Hold {
	select {
	case h := <-l.elected:
		if lead := l.Leadership(); lead != h && h.Err() == nil {
			select {
			case <-h.Done():
			default:
				e.t.Errorf("Leadership() = %v while the Hold OnElected reported still holds", lead)
			}
		}
		return h
	case <-time.After(budget / 3):
		e.t.Fatalf("%s within %v", what, budget/3)
	}
	return nil
}
