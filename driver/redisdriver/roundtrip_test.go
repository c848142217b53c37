package redisdriver_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/redis/go-redis/v9"
)

// tripCounter is a go-redis hook that counts round trips: one per command
// sent alone, one per pipeline. It also notes the round trips made on a
// goroutine without a frame of this package's tests: a goroutine of the
// driver's, not the caller's.
type tripCounter struct {
	// scripts: count only the round trips of scripts (the driver's), not
	// those the client makes itself (a connection's handshake, a
	// cluster's slot map).
	scripts  bool
	mu       sync.Mutex
	trips    []string
	detached []string
}

func (c *tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.add(cmd.Name())
		return next(ctx, cmd)
	}
}

func (c *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.add(fmt.Sprintf("pipeline(%d %s)", len(cmds), cmds[0].Name()))
		return next(ctx, cmds)
	}
}

func (c *tripCounter) add(s string) {
	if c.scripts && !strings.Contains(s, "eval") {
		return
	}
	buf := make([]byte, 64<<10)
	onCaller := false
	for _, line := range strings.Split(string(buf[:runtime.Stack(buf, false)]), "\n") {
		if strings.Contains(line, "redisdriver_test.") && !strings.Contains(line, "tripCounter") {
			onCaller = true // a frame of a test's, not of this hook's
		}
	}
	c.mu.Lock()
	c.trips = append(c.trips, s)
	if !onCaller {
		c.detached = append(c.detached, s)
	}
	c.mu.Unlock()
}

// count runs f and returns the round trips it made.
func (c *tripCounter) count(f func()) []string {
	c.mu.Lock()
	c.trips = nil
	c.mu.Unlock()
	f()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.trips
}

func wantTrips(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: round trips %q, want %q", what, got, want)
	}
}

func TestRoundTrips(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		c := b.client(t)
		tc := &tripCounter{}
		c.AddHook(tc)
		d := newDriver(t, c)
		k := uniqueKey(t, "k")

		// Warm-up: the server caches the scripts (EVALSHA, NOSCRIPT,
		// EVAL) and the pool has a connection.
		warm := mustAcquire(t, d, req(uniqueKey(t, "warm"), owner(), driver.Exclusive, time.Second))
		if _, err := d.Refresh(ctx, warm); err != nil {
			t.Fatal(err)
		}
		if err := d.Release(ctx, warm); err != nil {
			t.Fatal(err)
		}

		var l driver.Lease
		wantTrips(t, "TryAcquire", tc.count(func() { l = mustAcquire(t, d, req(k, owner(), driver.Exclusive, time.Second)) }), "evalsha")
		wantTrips(t, "contended TryAcquireQueued", tc.count(func() {
			_, err := tryQueued(d, ctx, req(k, owner(), driver.Exclusive, time.Second))
			lockedRemaining(t, err)
		}), "evalsha")
		wantTrips(t, "Refresh", tc.count(func() {
			if _, err := d.Refresh(ctx, l); err != nil {
				t.Fatal(err)
			}
		}), "evalsha")
		wantTrips(t, "Release", tc.count(func() {
			if err := d.Release(ctx, l); err != nil {
				t.Fatal(err)
			}
		}), "evalsha")
		wantTrips(t, "shared TryAcquire", tc.count(func() { l = mustAcquire(t, d, req(k+"s", owner(), driver.Shared, time.Second)) }), "evalsha")
		wantTrips(t, "shared Release", tc.count(func() {
			if err := d.Release(ctx, l); err != nil {
				t.Fatal(err)
			}
		}), "evalsha")

		// A server that lost its scripts (restart, failover, SCRIPT
		// FLUSH) costs one more round trip, once.
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		k2 := uniqueKey(t, "k2")
		wantTrips(t, "TryAcquire after SCRIPT FLUSH", tc.count(func() { l = mustAcquire(t, d, req(k2, owner(), driver.Exclusive, time.Second)) }), "evalsha", "eval")
		wantTrips(t, "TryAcquire after that", tc.count(func() { mustAcquire(t, d, req(k2, l.Owner, driver.Exclusive, time.Second)) }), "evalsha")
	})
}

// TestDoneContext: calls with a done context fail without a round trip.
func TestDoneContext(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		c := b.client(t)
		tc := &tripCounter{}
		c.AddHook(tc)
		d := newDriver(t, c)
		k := uniqueKey(t, "k")
		l := mustAcquire(t, d, req(k, owner(), driver.Exclusive, time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
		defer cancel()
		<-ctx.Done()
		var errs []error
		trips := tc.count(func() {
			_, err := d.TryAcquire(ctx, req(k, owner(), driver.Exclusive, time.Second))
			errs = append(errs, err)
			_, err = tryQueued(d, ctx, req(k, owner(), driver.Exclusive, time.Second))
			errs = append(errs, err)
			_, err = d.Refresh(ctx, l)
			errs = append(errs, err)
			errs = append(errs, d.Release(ctx, l))
			errs = append(errs, d.RefreshBatch(ctx, []driver.Lease{l, l})...)
			_, err = d.Subscribe(ctx, k)
			errs = append(errs, err)
		})
		wantTrips(t, "done context", trips)
		for i, err := range errs {
			if !errors.Is(err, context.DeadlineExceeded) || driver.IsPermanent(err) {
				t.Errorf("call %d: %v, want DeadlineExceeded", i, err)
			}
		}
		// Nothing changed.
		if _, err := d.Refresh(ctxT(t), l); err != nil {
			t.Fatal(err)
		}
	})
}

func TestRefreshBatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		c := b.client(t)
		tc := &tripCounter{}
		c.AddHook(tc)
		d := newDriver(t, c)

		n := 2500
		ls := make([]driver.Lease, n)
		for i := range ls {
			mode := driver.Mode(i % 2)
			// 30s: acquiring 2500 leases must not outlast them on a loaded machine.
			ls[i] = mustAcquire(t, d, req(uniqueKey(t, fmt.Sprint(i)), owner(), mode, 30*time.Second))
		}
		// Some are no longer held.
		lost := map[int]bool{3: true, n / 2: true, n - 1: true}
		for i := range lost {
			if err := d.Release(ctx, ls[i]); err != nil {
				t.Fatal(err)
			}
		}
		for i := range ls {
			ls[i].TTL = time.Minute
		}
		// Warm-up: the script is cached and go-redis has dialed the
		// connection of its pipeline pool.
		if err := d.RefreshBatch(ctx, ls[:1])[0]; err != nil {
			t.Fatal(err)
		}
		var errs []error
		trips := tc.count(func() { errs = d.RefreshBatch(ctx, ls) })
		// 1000 per pipeline.
		wantTrips(t, "RefreshBatch", trips, "pipeline(1000 evalsha)", "pipeline(1000 evalsha)", "pipeline(500 evalsha)")
		if len(errs) != n {
			t.Fatalf("len(errs) = %d", len(errs))
		}
		for i, err := range errs {
			switch {
			case lost[i]:
				wantNotHeld(t, fmt.Sprint("errs[", i, "]"), err)
			case err != nil:
				t.Errorf("errs[%d] = %v", i, err)
			}
		}
		// Extended: the holds now outlive their first TTL.
		_, err := d.TryAcquire(ctx, req(ls[0].Key, owner(), driver.Exclusive, time.Second))
		if rem := lockedRemaining(t, err); rem <= 40*time.Second {
			t.Fatalf("Remaining after RefreshBatch = %v, want > 40s", rem)
		}

		checkBatchEdges(t, c, d, tc, ls)
	})
}

// checkBatchEdges is TestRefreshBatch's check of the edges of a batch on
// d, whose client c counts its round trips in tc: NOSCRIPT in a pipeline
// (the leases are sent again with EVAL), an empty batch, and a canceled
// context. ls[3] is released.
func checkBatchEdges(t *testing.T, c redis.UniversalClient, d *redisdriver.Driver, tc *tripCounter, ls []driver.Lease) {
	t.Helper()
	ctx := ctxT(t)
	var errs []error
	// NOSCRIPT in a pipeline: the leases are sent again with EVAL.
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	trips := tc.count(func() { errs = d.RefreshBatch(ctx, ls[:10]) })
	wantTrips(t, "RefreshBatch after SCRIPT FLUSH", trips, "pipeline(10 evalsha)", "pipeline(10 eval)")
	for i, err := range errs {
		if (err == nil) == (i == 3) {
			t.Errorf("after SCRIPT FLUSH: errs[%d] = %v", i, err)
		}
	}
	if got := d.RefreshBatch(ctx, nil); len(got) != 0 {
		t.Errorf("RefreshBatch(nil) = %v", got)
	}

	// A canceled context: every outcome unknown, none ErrNotHeld.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	for i, err := range d.RefreshBatch(cctx, ls[:5]) {
		if err == nil || errors.Is(err, driver.ErrNotHeld) {
			t.Errorf("canceled: errs[%d] = %v", i, err)
		}
	}
}
