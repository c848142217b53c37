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
	var (
		mu        sync.Mutex
		holds     []checker.Hold
		acked     []int
		res       Result
		killedAt  time.Time
		firstPost time.Time
		seq       int
		post      []time.Time // grants after the kill
		ended     time.Time
	)
	res.FirstGrant = -1
	store := &checker.Resource{}
	start := time.Now()
	stop := make(chan struct{})
	runCtx, cancelRun := context.WithCancel(context.Background())
	defer cancelRun()
	var wg sync.WaitGroup
	for ci, c := range cfg.Clients {
		for gi := range cfg.Goroutines {
			client := ci*cfg.Goroutines + gi
			m := c.Mutex(cfg.Key, locker.WithTTL(cfg.TTL))
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					// A deadline long enough that it never decides when
					// the key comes back: 2×TTL after the kill the run
					// stops anyway.
					ctx, cancel := context.WithTimeout(runCtx, 3*cfg.TTL)
					err := m.LockContext(ctx)
					cancel()
					if err != nil {
						mu.Lock()
						if errors.Is(err, context.DeadlineExceeded) {
							res.Deadlines++
						}
						mu.Unlock()
						if runCtx.Err() != nil {
							return
						}
						if cfg.Log != nil && !errors.Is(err, context.DeadlineExceeded) {
							cfg.Log("client %d: lock: %v", client, err)
						}
						continue
					}
					got := time.Now()
					tok := uint64(m.Token())
					done := m.Done()
					mu.Lock()
					res.Grants++
					if !killedAt.IsZero() && ended.IsZero() {
						post = append(post, got)
					}
					if !killedAt.IsZero() && firstPost.IsZero() {
						firstPost = got
						if cfg.Log != nil {
							cfg.Log("first grant after the kill: client %d token %d after %v", client, tok, got.Sub(killedAt).Round(time.Millisecond))
						}
					}
					seq++
					item := seq
					mu.Unlock()
					items, ok := store.Read(client, tok)
					t := time.NewTimer(cfg.Hold)
					select {
					case <-t.C:
					case <-done:
						t.Stop()
					}
					if ok {
						if store.Write(client, tok, append(items, item)) {
							mu.Lock()
							acked = append(acked, item)
							mu.Unlock()
						}
					}
					var ended time.Time
					select {
					case <-done:
						// Lost while working: the belief ended when Done
						// closed, at the latest now.
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
						cfg.Log("client %d token %d: unlock at %v: %v", client, tok, sinceKill(&mu, &killedAt), uerr)
					}
					mu.Lock()
					if lost {
						res.Lost++
					}
					holds = append(holds, checker.Hold{Client: client, Token: tok, Acquired: got.Sub(start), Ended: ended.Sub(start)})
					mu.Unlock()
				}
			})
		}
	}
	time.Sleep(cfg.Before)
	k := cfg.Kill()
	if cfg.Log != nil {
		cfg.Log("killed at %v since start", k.Sub(start))
	}
	mu.Lock()
	killedAt = k
	mu.Unlock()
	elected := cfg.Elected()
	res.Election = elected.Sub(k)
	if cfg.Log != nil {
		cfg.Log("new leader %v after the kill", res.Election.Round(time.Millisecond))
	}
	limit := time.NewTimer(time.Until(k.Add(2 * cfg.TTL)))
	defer limit.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case <-limit.C:
			break wait
		case <-tick.C:
			mu.Lock()
			f := firstPost
			mu.Unlock()
			if !f.IsZero() && time.Since(f) >= cfg.After {
				break wait
			}
		}
	}
	mu.Lock()
	ended = time.Now()
	mu.Unlock()
	close(stop)
	cancelRun()
	wg.Wait()

	last := k
	for _, g := range append(post, ended) {
		res.MaxGap = max(res.MaxGap, g.Sub(last))
		last = g
	}

	if !firstPost.IsZero() {
		res.FirstGrant = firstPost.Sub(k)
	}
	res.Violations = checker.Holds(holds)
	if lost := store.Lost(acked); len(lost) > 0 {
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
