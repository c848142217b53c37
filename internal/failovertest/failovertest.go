// Package failovertest runs the failover scenario of the replicated-server
// tests: two Clients with two goroutines each contend for one key, doing a
// fenced read-modify-write in a short critical section, while the test
// kills the backend's leader; it checks that no holds overlap and no update
// is lost, and measures how long the key stays dead after the kill.
package failovertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/internal/checker"
)

// Runs returns how many times a failover test kills a leader: def, or
// LOCKER_FAILOVER_RUNS when it is a positive number.
func Runs(def int) int {
	if n, err := strconv.Atoi(os.Getenv("LOCKER_FAILOVER_RUNS")); err == nil && n > 0 {
		return n
	}
	return def
}

// Config describes one run.
type Config struct {
	// Clients are the contending Clients (two in the tests); each runs
	// Goroutines goroutines of its own Mutex for Key.
	Clients    []*locker.Client
	Goroutines int
	Key        string
	TTL        time.Duration // the lock's TTL
	Hold       time.Duration // the critical section
	// Before is how long the contention runs before the kill.
	Before time.Duration
	// Kill kills the leader and returns when it was killed; Elected
	// waits for a new leader and returns when it was seen.
	Kill    func() time.Time
	Elected func() time.Time
	// After is how long the contention goes on after the first grant
	// that follows the kill (it always stops 2×TTL after the kill).
	After time.Duration
	// Restore, if not nil, brings the killed server back after the run.
	Restore func()
	// Log, if not nil, receives progress lines.
	Log func(format string, args ...any)
}

// Scenario returns the configuration of issue 33's scenario on clients
// (two of them): two goroutines each contend for key with a 300 ms
// critical section and a TTL of 5 s; the leader is killed 2 s in, and the
// run goes on until 3 s after the first grant that follows the kill. The
// caller sets Kill, Elected and, where it applies, Restore and Log.
func Scenario(clients []*locker.Client, key string) Config {
	return Config{
		Clients: clients, Goroutines: 2, Key: key,
		TTL: 5 * time.Second, Hold: 300 * time.Millisecond,
		Before: 2 * time.Second, After: 3 * time.Second,
	}
}

// Clients returns n Clients, each over a driver of its own that mk makes,
// closed at t's cleanup.
func Clients(t testing.TB, n int, mk func() driver.Driver, opts ...locker.Option) []*locker.Client {
	t.Helper()
	var cs []*locker.Client
	for range n {
		c := locker.New(mk(), opts...)
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		cs = append(cs, c)
	}
	return cs
}

// Result is what a run saw.
type Result struct {
	Election   time.Duration // from the kill to the new leader seen
	FirstGrant time.Duration // from the kill to the first grant after it, or -1
	// MaxGap is the longest time after the kill without a grant: from
	// the kill or a grant to the next grant, until the run ended. It
	// catches a stall after a grant that came just after the kill (a
	// release in flight at the kill of a holder granted just before).
	MaxGap     time.Duration
	Grants     int     // grants in the whole run
	Deadlines  int     // lock calls that ran into their deadline
	Lost       int     // holds that ended as lost
	Violations []error // overlaps, token disorder, lost updates
}

// Run runs the scenario once.
func Run(t testing.TB, cfg Config) Result {
	t.Helper()
	r := &run{cfg: cfg, store: &checker.Resource{}, stop: make(chan struct{})}
	r.res.FirstGrant = -1
	r.start = time.Now()
	runCtx, cancelRun := context.WithCancel(context.Background())
	defer cancelRun()
	r.runCtx = runCtx
	var wg sync.WaitGroup
	for ci, c := range cfg.Clients {
		for gi := range cfg.Goroutines {
			client := ci*cfg.Goroutines + gi
			m := c.Mutex(cfg.Key, locker.WithTTL(cfg.TTL))
			wg.Add(1)
			go func() { defer wg.Done(); r.contend(client, m) }()
		}
	}
	time.Sleep(cfg.Before)
	k := cfg.Kill()
	if cfg.Log != nil {
		cfg.Log("killed at %v since start", k.Sub(r.start))
	}
	r.mu.Lock()
	r.killedAt = k
	r.mu.Unlock()
	elected := cfg.Elected()
	r.res.Election = elected.Sub(k)
	if cfg.Log != nil {
		cfg.Log("new leader %v after the kill", r.res.Election.Round(time.Millisecond))
	}
	r.waitAfterKill(k)
	r.mu.Lock()
	r.ended = time.Now()
	r.mu.Unlock()
	close(r.stop)
	cancelRun()
	wg.Wait()
	return r.result(k)
}

// run is the state of one Run that its goroutines share.
type run struct {
	cfg    Config
	store  *checker.Resource
	start  time.Time
	stop   chan struct{}
	runCtx context.Context

	mu        sync.Mutex
	holds     []checker.Hold
	acked     []int
	res       Result
	killedAt  time.Time
	firstPost time.Time
	seq       int
	post      []time.Time // grants after the kill
	ended     time.Time
}

// contend locks and unlocks m, as client number client, until the run
// stops, recording every grant, hold and acknowledged write.
func (r *run) contend(client int, m *locker.Mutex) {
	for {
		select {
		case <-r.stop:
			return
		default:
		}
		locked, quit := r.lock(client, m)
		if quit {
			return
		}
		if !locked {
			continue
		}
		got := time.Now()
		tok := uint64(m.Token())
		done := m.Done()
		item := r.granted(client, tok, got)
		r.work(client, tok, item, done)
		r.unlock(client, m, tok, got, done)
	}
}

// lock calls m.LockContext, counting the calls that run into their
// deadline; quit is true when the run is over.
func (r *run) lock(client int, m *locker.Mutex) (locked, quit bool) {
	cfg := r.cfg
	// A deadline long enough that it never decides when the key comes
	// back: 2×TTL after the kill the run stops anyway.
	ctx, cancel := context.WithTimeout(r.runCtx, 3*cfg.TTL)
	err := m.LockContext(ctx)
	cancel()
	if err == nil {
		return true, false
	}
	r.mu.Lock()
	if errors.Is(err, context.DeadlineExceeded) {
		r.res.Deadlines++
	}
	r.mu.Unlock()
	if r.runCtx.Err() != nil {
		return false, true
	}
	if cfg.Log != nil && !errors.Is(err, context.DeadlineExceeded) {
		cfg.Log("client %d: lock: %v", client, err)
	}
	return false, false
}

// granted records a grant of token tok to client at got, and returns the
// item the holder will add to the resource.
func (r *run) granted(client int, tok uint64, got time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res.Grants++
	if !r.killedAt.IsZero() && r.ended.IsZero() {
		r.post = append(r.post, got)
	}
	if !r.killedAt.IsZero() && r.firstPost.IsZero() {
		r.firstPost = got
		if r.cfg.Log != nil {
			r.cfg.Log("first grant after the kill: client %d token %d after %v", client, tok, got.Sub(r.killedAt).Round(time.Millisecond))
		}
	}
	r.seq++
	return r.seq
}

// work is the critical section: it reads the resource, holds for
// cfg.Hold (or until the hold is lost, done) and writes item, recording
// the write if the resource acknowledged it.
func (r *run) work(client int, tok uint64, item int, done <-chan struct{}) {
	items, ok := r.store.Read(client, tok)
	t := time.NewTimer(r.cfg.Hold)
	select {
	case <-t.C:
	case <-done:
		t.Stop()
	}
	if ok {
		if r.store.Write(client, tok, append(items, item)) {
			r.mu.Lock()
			r.acked = append(r.acked, item)
			r.mu.Unlock()
		}
	}
}

// unlock unlocks m and records the hold of token tok, granted at got,
// with the time the holder's belief ended, and whether it was lost.
func (r *run) unlock(client int, m *locker.Mutex, tok uint64, got time.Time, done <-chan struct{}) {
	cfg := r.cfg
	var ended time.Time
	select {
	case <-done:
		// Lost while working: the belief ended when Done closed, at the
		// latest now.
		ended = time.Now()
	default:
	}
	if ended.IsZero() {
		ended = time.Now() // the belief ends when Unlock begins
	}
	uctx, ucancel := context.WithTimeout(context.Background(), cfg.TTL)
	uerr := m.UnlockContext(uctx)
	ucancel()
	lost := errors.Is(uerr, locker.ErrLost)
	if uerr != nil && cfg.Log != nil {
		cfg.Log("client %d token %d: unlock at %v: %v", client, tok, sinceKill(&r.mu, &r.killedAt), uerr)
	}
	r.mu.Lock()
	if lost {
		r.res.Lost++
	}
	r.holds = append(r.holds, checker.Hold{Client: client, Token: tok, Acquired: got.Sub(r.start), Ended: ended.Sub(r.start)})
	r.mu.Unlock()
}

// waitAfterKill waits, after the kill at k, until cfg.After has passed
// since the first grant after it, or at most 2×TTL after the kill.
func (r *run) waitAfterKill(k time.Time) {
	limit := time.NewTimer(time.Until(k.Add(2 * r.cfg.TTL)))
	defer limit.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-limit.C:
			return
		case <-tick.C:
			r.mu.Lock()
			f := r.firstPost
			r.mu.Unlock()
			if !f.IsZero() && time.Since(f) >= r.cfg.After {
				return
			}
		}
	}
}

// result returns what the run saw, once its goroutines are done: the
// times after the kill at k and the violations of the holds and writes.
func (r *run) result(k time.Time) Result {
	res := r.res
	last := k
	for _, g := range append(r.post, r.ended) {
		res.MaxGap = max(res.MaxGap, g.Sub(last))
		last = g
	}

	if !r.firstPost.IsZero() {
		res.FirstGrant = r.firstPost.Sub(k)
	}
	res.Violations = checker.Holds(r.holds)
	if lost := r.store.Lost(r.acked); len(lost) > 0 {
		res.Violations = append(res.Violations, fmt.Errorf("lost updates: %v", lost))
	}
	return res
}

func sinceKill(mu *sync.Mutex, k *time.Time) string {
	mu.Lock()
	defer mu.Unlock()
	if k.IsZero() {
		return "before the kill"
	}
	return fmt.Sprintf("kill%+v", time.Since(*k).Round(time.Millisecond))
}

// Check runs the scenario runs times and fails t on a violation, on a run
// where the key went without a grant for longer than one TTL after the
// kill (Result.MaxGap, which bounds the first grant after it), and, when
// strict, for longer than the new leader's election time plus slack. It
// returns the results for the record.
func Check(t *testing.T, runs int, slack time.Duration, strict bool, cfg func(run int) Config) []Result {
	t.Helper()
	var out []Result
	for i := range runs {
		c := cfg(i)
		r := Run(t, c)
		if c.Restore != nil {
			c.Restore()
		}
		out = append(out, r)
		t.Logf("run %d: new leader %v, first grant after the kill %v, longest time without a grant after it %v, %d grants, %d lock deadlines, %d lost holds",
			i, r.Election.Round(time.Millisecond), r.FirstGrant.Round(time.Millisecond), r.MaxGap.Round(time.Millisecond), r.Grants, r.Deadlines, r.Lost)
		for _, err := range r.Violations {
			t.Errorf("run %d: %v", i, err)
		}
		switch {
		case r.FirstGrant < 0:
			t.Errorf("run %d: no grant in the %v after the kill", i, 2*c.TTL)
		case r.MaxGap > c.TTL:
			t.Errorf("run %d: %v without a grant after the kill (first grant after %v); want at most the TTL %v", i, r.MaxGap, r.FirstGrant, c.TTL)
		case r.MaxGap > r.Election+slack:
			if strict {
				t.Errorf("run %d: %v without a grant after the kill (first grant after %v); want at most the election (%v) + %v", i, r.MaxGap, r.FirstGrant, r.Election, slack)
			} else {
				t.Logf("run %d: %v without a grant after the kill, beyond the election (%v) + %v", i, r.MaxGap, r.Election, slack)
			}
		}
	}
	return out
}
