package lockertest

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-locker/locker"
)

// clients returns n Clients, each on a driver of its own (as n processes
// would have), closed when the subtest ends.
func (e *env) clients(n int, opts ...locker.Option) []*locker.Client {
	e.t.Helper()
	opts = append([]locker.Option{locker.WithTTL(e.long), locker.WithErrorHandler(func(err error) {
		e.errorf("error handler: %v", err)
	})}, opts...)
	var cs []*locker.Client
	for _, d := range e.drivers(n) {
		c := locker.New(d, opts...)
		e.t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := c.Close(ctx); err != nil {
				e.t.Errorf("Client.Close: %v", err)
			}
		})
		cs = append(cs, c)
	}
	return cs
}

// testSemaphoreHammer takes permits of one semaphore from goroutines on
// several Clients, with random weights: the permits held never exceed the
// size, and every grant has a token greater than those of the grants that
// were released before it was asked for.
func testSemaphoreHammer(e *env) {
	e.skipUnlessCounted()
	const size, clients, perClient, iterations = 3, 3, 3, 15
	key := e.key("k")
	var (
		held     atomic.Int64
		maxToken atomic.Uint64 // of the holds released so far
		grants   atomic.Int64
	)
	stop := time.Now().Add(hammerTime)
	var wg sync.WaitGroup
	for _, c := range e.clients(clients) {
		for range perClient {
			s := c.Semaphore(key, size)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < iterations && time.Now().Before(stop) && e.ctx.Err() == nil; i++ {
					w := 1 + rand.Int64N(2)
					floor := maxToken.Load()
					h, err := s.Acquire(e.ctx, w)
					if err != nil {
						if e.ctx.Err() == nil {
							e.errorf("Semaphore.Acquire(%d): %v", w, err)
						}
						return
					}
					if n := held.Add(w); n > size {
						e.errorf("%d permits of a semaphore of %d held at once", n, size)
					}
					if uint64(h.Token()) <= floor {
						e.errorf("permit grant has token %d, not above the %d of a hold released before it was asked for", h.Token(), floor)
					}
					if h.Weight() != w {
						e.errorf("Hold.Weight() = %d; want %d", h.Weight(), w)
					}
					grants.Add(1)
					time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
					held.Add(-w)
					for t := maxToken.Load(); uint64(h.Token()) > t && !maxToken.CompareAndSwap(t, uint64(h.Token())); t = maxToken.Load() {
					}
					if err := h.Release(e.ctx); err != nil {
						e.errorf("Hold.Release: %v", err)
					}
				}
			}()
		}
	}
	wg.Wait()
	if grants.Load() == 0 {
		e.t.Errorf("no permit was granted")
	}
	e.t.Logf("%d permit grants", grants.Load())
}

// testSemaphore checks a Semaphore's rules: Acquire and TryAcquire (a try
// that finds the permits taken fails with ErrLocked), no barging past a
// large waiting request, a size mismatch reported at once, and bad weights
// refused before any I/O.
func testSemaphore(e *env) {
	e.skipUnlessCounted()
	cs := e.clients(3)
	key := e.key("k")
	s0, s1, s2 := cs[0].Semaphore(key, 2), cs[1].Semaphore(key, 2), cs[2].Semaphore(key, 2)

	h0 := checkSemaphoreTry(e, s0, s1, s2)
	h2 := checkSemaphoreNoBarging(e, s1, s2, h0)
	checkSemaphoreSizeMismatch(e, cs[0], key, h2)
	for _, w := range []int64{0, -1, 3} {
		if _, err := s0.Acquire(e.ctx, w); !errors.Is(err, locker.ErrInvalidWeight) {
			e.t.Errorf("Semaphore.Acquire(%d) of a semaphore of 2: %v; want an error wrapping ErrInvalidWeight", w, err)
		}
	}
}

// checkSemaphoreTry takes a permit of s0 by Acquire and one of s1 by
// TryAcquire, checks that a TryAcquire of s2 then fails with ErrLocked,
// releases s1's permit and returns s0's hold.
func checkSemaphoreTry(e *env, s0, s1, s2 *locker.Semaphore) *locker.Hold {
	h0, err := s0.Acquire(e.ctx, 1)
	if err != nil {
		e.t.Fatalf("Semaphore.Acquire(1): %v", err)
	}
	h1, err := s1.TryAcquire(e.ctx, 1)
	if err != nil {
		e.t.Fatalf("Semaphore.TryAcquire(1) with 1 of 2 permits held: %v; want the permit", err)
	}
	if h, err := s2.TryAcquire(e.ctx, 1); !errors.Is(err, locker.ErrLocked) {
		e.t.Errorf("Semaphore.TryAcquire(1) with every permit held: %v; want an error wrapping ErrLocked", err)
		if h != nil {
			h.Release(e.ctx)
		}
	}
	if err := h1.Release(e.ctx); err != nil {
		e.t.Errorf("Hold.Release of a permit: %v", err)
	}
	return h0
}

// checkSemaphoreNoBarging checks that a waiting request of s2 for 2
// permits is not overtaken by a later one of s1 for 1, and is granted once
// h0 is released; it returns the hold of the 2 permits.
func checkSemaphoreNoBarging(e *env, s1, s2 *locker.Semaphore, h0 *locker.Hold) *locker.Hold {
	type grant struct {
		h   *locker.Hold
		err error
	}
	acquired := make(chan grant, 1)
	go func() {
		h, err := s2.Acquire(e.ctx, 2)
		acquired <- grant{h, err}
	}()
	e.sleep(300 * time.Millisecond)
	if e.caps.Queue || e.caps.Acquire {
		if h, err := s1.TryAcquire(e.ctx, 1); err == nil {
			e.t.Errorf("Semaphore.TryAcquire(1) succeeded while a request for 2 waited ahead of it")
			h.Release(e.ctx)
		}
	}
	if err := h0.Release(e.ctx); err != nil {
		e.t.Errorf("Hold.Release of a permit: %v", err)
	}
	var h2 *locker.Hold
	select {
	case g := <-acquired:
		if g.err != nil {
			e.t.Fatalf("Semaphore.Acquire(2) once the permits were free: %v", g.err)
		}
		h2 = g.h
	case <-time.After(budget / 3):
		e.t.Fatalf("Semaphore.Acquire(2) still waits %v after both permits were released", budget/3)
	}
	return h2
}

// checkSemaphoreSizeMismatch checks that a semaphore of another size is
// refused at once while h2 holds key, then releases h2.
func checkSemaphoreSizeMismatch(e *env, c *locker.Client, key string, h2 *locker.Hold) {
	start := time.Now()
	if h, err := c.Semaphore(key, 3).Acquire(e.ctx, 1); !errors.Is(err, locker.ErrLimitMismatch) {
		e.t.Errorf("Acquire on a Semaphore of size 3 while size-2 permits are held: %v; want an error wrapping ErrLimitMismatch", err)
		if h != nil {
			h.Release(e.ctx)
		}
	} else if d := time.Since(start); d > 5*time.Second {
		e.t.Errorf("the size mismatch took %v to report; want it at once", d)
	}
	if err := h2.Release(e.ctx); err != nil {
		e.t.Errorf("Hold.Release of 2 permits: %v", err)
	}
}

// skipUnlessElections skips the subtest unless the drivers keep values
// and can be inspected.
func (e *env) skipUnlessElections() {
	e.t.Helper()
	e.skipUnless(e.caps.Values, "Values")
	e.skipUnless(e.caps.Inspect, "Inspect")
}

// testElection elects leaders one after another: each term is greater
// than the last, Leader and Observe report the leader's value and term, a
// waiting candidate is elected when the leader resigns, and an election
// without a leader says so.
func testElection(e *env) {
	e.skipUnlessElections()
	cs := e.clients(3)
	key := e.key("k")
	e0, e1, e2 := cs[0].Election(key), cs[1].Election(key), cs[2].Election(key)

	if _, err := e2.Leader(e.ctx); !errors.Is(err, locker.ErrNoLeader) {
		e.t.Errorf("Election.Leader before any campaign: %v; want an error wrapping ErrNoLeader", err)
	}
	octx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	changes, err := e2.Observe(octx)
	if err != nil {
		e.t.Fatalf("Election.Observe: %v", err)
	}
	next := func(want string) locker.Leader {
		e.t.Helper()
		for {
			select {
			case l := <-changes:
				if l.Value == want {
					return l
				}
			case <-time.After(budget / 3):
				e.t.Fatalf("Observe did not report leader %q within %v", want, budget/3)
			}
		}
	}
	if l := next(""); l.Term != 0 {
		e.t.Errorf("Observe's first report without a leader = %+v; want the zero Leader", l)
	}

	h0 := checkFirstLeader(e, e0, e1, next)
	h1 := checkWaiterElectedOnResign(e, e0, e1)
	if h1 == nil {
		return
	}
	if h1.Token() <= h0.Token() {
		e.t.Errorf("second leader's term %d is not above the first's %d", h1.Token(), h0.Token())
	}
	if l := next("one"); l.Term != h1.Token() {
		e.t.Errorf("Observe reported %+v; want term %d", l, h1.Token())
	}
	if err := h1.Release(e.ctx); err != nil {
		e.t.Errorf("leadership Hold.Release: %v", err)
	}
	next("")
	if _, err := e1.Leader(e.ctx); !errors.Is(err, locker.ErrNoLeader) {
		e.t.Errorf("Election.Leader after the last leader resigned: %v; want an error wrapping ErrNoLeader", err)
	}
	cancel()
	for range changes {
	}
}

// checkFirstLeader elects e0 with the value "zero" and checks that
// Leader on e1 and Observe (whose next report next waits for) report it
// with its term; it returns the leadership hold.
func checkFirstLeader(e *env, e0, e1 *locker.Election, next func(want string) locker.Leader) *locker.Hold {
	h0, err := e0.Campaign(e.ctx, "zero")
	if err != nil {
		e.t.Fatalf("Election.Campaign: %v", err)
	}
	if l, err := e1.Leader(e.ctx); err != nil || l.Value != "zero" || l.Term != h0.Token() {
		e.t.Errorf("Election.Leader = %+v, %v; want {zero %d}", l, err, h0.Token())
	}
	if l := next("zero"); l.Term != h0.Token() {
		e.t.Errorf("Observe reported %+v; want term %d", l, h0.Token())
	}
	return h0
}

// checkWaiterElectedOnResign campaigns on e1 while e0 leads, checks that
// e1 is not elected until e0 resigns (twice: the second Resign finds
// nothing held), and returns e1's leadership hold, nil if its campaign
// failed.
func checkWaiterElectedOnResign(e *env, e0, e1 *locker.Election) *locker.Hold {
	elected := make(chan *locker.Hold, 1)
	go func() {
		h, err := e1.Campaign(e.ctx, "one")
		if err != nil {
			e.errorf("second Election.Campaign: %v", err)
		}
		elected <- h
	}()
	e.sleep(200 * time.Millisecond)
	select {
	case <-elected:
		e.t.Fatalf("a second candidate was elected while the leader held")
	default:
	}
	if err := e0.Resign(e.ctx); err != nil {
		e.t.Fatalf("Election.Resign: %v", err)
	}
	if err := e0.Resign(e.ctx); !errors.Is(err, locker.ErrNotHeld) {
		e.t.Errorf("second Election.Resign: %v; want an error wrapping ErrNotHeld", err)
	}
	return <-elected
}

// testMultiLock locks overlapping sets of keys, given in different orders,
// from goroutines on several Clients: nobody deadlocks, no key is held by
// two at once, every part has its own token, and a try that finds one key
// taken leaves none of the others held.
func testMultiLock(e *env) {
	const clients, perClient, iterations = 3, 2, 8
	cs := e.clients(clients)
	a, b, c := e.key("a"), e.key("b"), e.key("c")
	sets := [][]string{{a, b}, {b, a}, {c, b, a}, {b, c}}
	h := &multiLockHammer{e: e, iterations: iterations, stop: time.Now().Add(hammerTime), owners: map[string]int{}}
	var wg sync.WaitGroup
	for ci, cl := range cs {
		for g := range perClient {
			id := ci*perClient + g + 1
			ml := cl.MultiLock(sets[id%len(sets)])
			wg.Add(1)
			go func() {
				defer wg.Done()
				h.hammer(ml, id)
			}()
		}
	}
	wg.Wait()
	if h.locks.Load() == 0 {
		e.t.Fatalf("no MultiLock was acquired")
	}
	checkMultiLockAllOrNothing(e, cs, a, b, c)
}

// multiLockHammer is the state testMultiLock's goroutines share.
type multiLockHammer struct {
	e          *env
	iterations int
	stop       time.Time
	mu         sync.Mutex
	owners     map[string]int // guarded by mu
	locks      atomic.Int64
}

// hammer acquires and releases ml, the MultiLock numbered id, until it has
// done its iterations or the hammer time is over, checking while it holds
// that no other MultiLock holds its keys and that every part has a token.
func (h *multiLockHammer) hammer(ml *locker.MultiLock, id int) {
	e := h.e
	for i := 0; i < h.iterations && time.Now().Before(h.stop) && e.ctx.Err() == nil; i++ {
		mh, err := ml.Acquire(e.ctx)
		if err != nil {
			if e.ctx.Err() == nil {
				e.errorf("MultiLock.Acquire: %v", err)
			}
			return
		}
		h.mu.Lock()
		for _, k := range ml.Keys() {
			if o := h.owners[k]; o != 0 {
				e.errorf("key %q held by MultiLocks %d and %d at once", k, o, id)
			}
			h.owners[k] = id
			if mh.Token(k) == 0 {
				e.errorf("MultiHold.Token(%q) = 0", k)
			}
		}
		h.mu.Unlock()
		time.Sleep(200 * time.Microsecond)
		h.mu.Lock()
		for _, k := range ml.Keys() {
			h.owners[k] = 0
		}
		h.mu.Unlock()
		h.locks.Add(1)
		if err := mh.Release(e.ctx); err != nil {
			e.errorf("MultiHold.Release: %v", err)
		}
	}
}

// checkMultiLockAllOrNothing checks that a MultiLock try that finds one
// key (b) held elsewhere leaves none of the others held, and that a
// MultiHold's Done closes when one of its parts is released.
func checkMultiLockAllOrNothing(e *env, cs []*locker.Client, a, b, c string) {
	m := cs[0].Mutex(b)
	if err := m.LockContext(e.ctx); err != nil {
		e.t.Fatalf("Mutex.LockContext: %v", err)
	}
	if _, err := cs[1].MultiLock([]string{a, b, c}).TryAcquire(e.ctx); !errors.Is(err, locker.ErrLocked) {
		e.t.Errorf("MultiLock.TryAcquire with one key held elsewhere: %v; want an error wrapping ErrLocked", err)
	}
	other := cs[2].MultiLock([]string{a, c})
	mh, err := other.TryAcquire(e.ctx)
	if err != nil {
		e.t.Fatalf("MultiLock.TryAcquire of the keys a failed try had taken: %v; want them free", err)
	}
	select {
	case <-mh.Done():
		e.t.Errorf("MultiHold.Done closed while every part holds")
	default:
	}
	if err := mh.Holds()[0].Release(e.ctx); err != nil {
		e.t.Errorf("Hold.Release of a part: %v", err)
	}
	select {
	case <-mh.Done():
	case <-time.After(5 * time.Second):
		e.t.Errorf("MultiHold.Done still open after a part was released")
	}
	mh.Release(e.ctx)
	m.Unlock()
}
