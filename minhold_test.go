//go:build go1.25

package locker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
)

// held reports whether key is held on b.
func held(b *memdriver.Backend, key string) bool { return len(b.Holders(key)) > 0 }

func TestMinHold_EarlyReleaseKeepsKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		ctx := context.Background()
		c := locker.New(b.Driver(), locker.WithTTL(2*time.Second), locker.WithMinHold(500*time.Millisecond))
		defer c.Close(ctx)
		other := locker.New(b.Driver())
		defer other.Close(ctx)

		start := time.Now()
		h, err := c.Mutex("k").Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
		if err := h.Release(ctx); err != nil {
			t.Fatalf("Release before the minimum hold: %v; want nil", err)
		}
		select {
		case <-h.Done():
		default:
			t.Fatal("Done still open after Release")
		}
		if err := h.Err(); err != nil {
			t.Errorf("Err after an early Release = %v; want nil", err)
		}
		if !held(b, "k") {
			t.Fatal("key free on the backend right after an early Release; want it kept until the minimum hold")
		}
		if _, err := other.Mutex("k").TryAcquire(ctx); !errors.Is(err, locker.ErrLocked) {
			t.Fatalf("another Client's TryAcquire during the minimum hold: %v; want ErrLocked", err)
		}
		// A lock call of the same Client waits like anyone else, and gets
		// the key when the minimum hold ends.
		m := c.Mutex("k")
		if err := m.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 500*time.Millisecond {
			t.Errorf("the key was granted again %v after the first grant; want exactly the minimum hold, 500ms", d)
		}
		m.Unlock() // kept until 1s now
		time.Sleep(499 * time.Millisecond)
		if !held(b, "k") {
			t.Error("key free 499ms after a grant with a 500ms minimum hold")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if held(b, "k") {
			t.Error("key still held when the minimum hold had passed; want it released then")
		}
	})
}

func TestMinHold_LateReleaseIsImmediate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		ctx := context.Background()
		c := locker.New(b.Driver(), locker.WithTTL(time.Second), locker.WithMinHold(100*time.Millisecond))
		defer c.Close(ctx)
		h, err := c.Mutex("k").Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // renewed meanwhile
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if held(b, "k") {
			t.Error("key still held after a Release past the minimum hold")
		}
	})
}

// TestMinHold_CloseDoesNotShorten closes a Client with a hold released
// early, one still held and one without a minimum hold: Close returns at
// once, frees the plain key at once and the others at the end of their
// minimum holds.
// TestMinHold_CloseReleasesAtTheEnd: Close keeps the leases of minimum
// holds that have not passed, a released hold's and one it ends, and
// releases each at its end, waiting for them: a process that exits after
// Close leaves none for its TTL.
func TestMinHold_CloseReleasesAtTheEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		ctx := context.Background()
		c := locker.New(b.Driver(), locker.WithTTL(10*time.Second))
		start := time.Now()
		released, err := c.Mutex("released", locker.WithMinHold(300*time.Millisecond)).Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		running, err := c.Mutex("running", locker.WithMinHold(600*time.Millisecond)).Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Mutex("plain").Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		if err := released.Release(ctx); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		freed := map[string]time.Duration{}
		watch := func(key string) {
			for held(b, key) {
				time.Sleep(time.Millisecond)
			}
			mu.Lock()
			freed[key] = time.Since(start)
			mu.Unlock()
		}
		var wg sync.WaitGroup
		for _, k := range []string{"released", "running", "plain"} {
			wg.Go(func() { watch(k) })
		}
		if err := c.Close(ctx); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if d := time.Since(start); d != 600*time.Millisecond {
			t.Errorf("Close returned after %v; want 600ms, when the last minimum hold ended and its lease was released", d)
		}
		if held(b, "running") || held(b, "released") {
			t.Error("a lease kept for a minimum hold is still held when Close returns")
		}
		if err := running.Err(); !errors.Is(err, locker.ErrClosed) {
			t.Errorf("Err of a hold ended by Close = %v; want ErrClosed", err)
		}
		wg.Wait()
		want := map[string]time.Duration{"plain": 0, "released": 300 * time.Millisecond, "running": 600 * time.Millisecond}
		for k, w := range want {
			// watch polls every millisecond
			if d := freed[k]; d < w || d > w+time.Millisecond {
				t.Errorf("key %q freed %v after the grants; want %v", k, d, w)
			}
		}
	})
}

// TestMinHold_CloseByItsDeadline: a Close whose context ends before a
// minimum hold returns the context's error then; the lease is released at
// the minimum hold's end all the same while the process lives.
func TestMinHold_CloseByItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		c := locker.New(b.Driver(), locker.WithTTL(10*time.Second), locker.WithMinHold(time.Second))
		start := time.Now()
		if _, err := c.Mutex("k").Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := c.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Close with 100ms for a 1s minimum hold: %v; want DeadlineExceeded", err)
		}
		if d := time.Since(start); d != 100*time.Millisecond {
			t.Errorf("Close returned after %v; want by its 100ms deadline", d)
		}
		time.Sleep(time.Second - time.Since(start) - time.Nanosecond)
		if !held(b, "k") {
			t.Error("key free before the end of its minimum hold")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if held(b, "k") {
			t.Error("key held after the end of its minimum hold; want it released then")
		}
	})
}

func TestMinHold_BadOption(t *testing.T) {
	b := memdriver.NewBackend()
	for _, tc := range []struct {
		opts []locker.Option
		want string
	}{
		{[]locker.Option{locker.WithMinHold(0)}, "min hold 0s is not positive"},
		{[]locker.Option{locker.WithMinHold(-time.Second)}, "not positive"},
		{[]locker.Option{locker.WithTTL(time.Second), locker.WithMinHold(950 * time.Millisecond)}, "min hold 950ms is longer than TTL 1s minus the safety margin 100ms"},
	} {
		_, err := locker.NewMutex(b.Driver(), "k", tc.opts...).Acquire(context.Background())
		if !errors.Is(err, locker.ErrInvalidOption) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `"k"`) {
			t.Errorf("Acquire with a bad min hold: %v; want ErrInvalidOption naming the key and saying %q", err, tc.want)
		}
	}
	if held(b, "k") {
		t.Error("a refused lock call left the key held")
	}
}

// TestMinHold_OncePerTick runs the scheduled-job scenario in a bubble: 3
// replicas whose clocks are 30ms early, exact and 30ms late each try a job
// key at every tick of a 1s schedule, run the job (5ms) if they get it and
// release it. With a minimum hold of half the interval every tick runs
// once; without one, the late replicas find the key free again and run the
// tick too.
func TestMinHold_OncePerTick(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    []locker.Option
		perTick int // runs of each tick
	}{
		{"MinHold", []locker.Option{locker.WithMinHold(500 * time.Millisecond)}, 1},
		{"Plain", nil, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs := onceInBubble(t, 20, tc.opts)
			for tick, n := range runs {
				if n != tc.perTick {
					t.Errorf("tick %d ran %d times; want %d", tick, n, tc.perTick)
				}
			}
		})
	}
}

func onceInBubble(t *testing.T, ticks int, opts []locker.Option) []int {
	runs := make([]int, ticks)
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		epoch := time.Now()
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, offset := range []time.Duration{-30 * time.Millisecond, 0, 30 * time.Millisecond} {
			c := locker.New(b.Driver(), append([]locker.Option{locker.WithTTL(900 * time.Millisecond)}, opts...)...)
			defer c.Close(context.Background())
			wg.Go(func() {
				for tick := range ticks {
					// The replica's clock reads tick+1 seconds at
					// real time epoch+tick+1s+offset.
					time.Sleep(time.Until(epoch.Add(time.Duration(tick+1)*time.Second + offset)))
					h, err := c.Mutex("cron/job").TryAcquire(context.Background())
					if errors.Is(err, locker.ErrLocked) {
						continue
					}
					if err != nil {
						panic(fmt.Sprint(err))
					}
					mu.Lock()
					runs[tick]++
					mu.Unlock()
					time.Sleep(5 * time.Millisecond)
					h.Release(context.Background())
				}
			})
		}
		wg.Wait()
	})
	return runs
}

// slowGrant is a driver whose grants reach the caller late: the backend
// counts the lease from before the caller learns of it.
type slowGrant struct {
	*memdriver.Driver
	delay     time.Duration
	refreshes int
}

func (s *slowGrant) TryAcquire(ctx context.Context, r driver.Request) (driver.Lease, error) {
	l, err := s.Driver.TryAcquire(ctx, r)
	time.Sleep(s.delay)
	return l, err
}

func (s *slowGrant) Refresh(ctx context.Context, l driver.Lease) (driver.Lease, error) {
	s.refreshes++
	return s.Driver.Refresh(ctx, l)
}

// TestMinHold_SlowGrant: a grant received 200ms after the backend made it
// is kept for the minimum hold from its receipt (900ms of a 1s TTL), past
// the lease the backend granted, which one Refresh at the release extends.
func TestMinHold_SlowGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		ctx := context.Background()
		d := &slowGrant{Driver: b.Driver(), delay: 200 * time.Millisecond}
		c := locker.New(d, locker.WithTTL(time.Second), locker.WithMinHold(900*time.Millisecond))
		defer c.Close(ctx)
		start := time.Now()
		h, err := c.Mutex("k").TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if d.refreshes != 1 {
			t.Errorf("%d refreshes at the release; want 1, to extend the lease past the backend's 1s", d.refreshes)
		}
		time.Sleep(start.Add(1099 * time.Millisecond).Sub(time.Now()))
		if !held(b, "k") {
			t.Errorf("key free %v after the backend granted it; want it held until 200ms+900ms", time.Since(start))
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if held(b, "k") {
			t.Error("key still held after the minimum hold")
		}
	})
}
