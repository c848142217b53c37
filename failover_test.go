//go:build go1.25

package locker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
)

// TestReleaseRetriedAfterConnectionError: an Unlock whose Release fails
// with a transient error (a connection broken by a leader change) reports
// it, and the release is retried in the background until it lands, so that
// another process gets the key at once rather than a TTL later.
func TestReleaseRetriedAfterConnectionError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		f := &flakyRelease{Driver: b.Driver()}
		opt, errs := quiet(t)
		m := locker.NewMutex(f, "k", opt, locker.WithTTL(time.Minute))
		if err := m.LockContext(context.Background()); err != nil {
			t.Fatal(err)
		}
		f.fails.Store(2)
		if err := m.UnlockContext(context.Background()); !errors.Is(err, errFlaky) {
			t.Fatalf("UnlockContext = %v; want the connection error", err)
		}
		// Another process: granted once the retries land (20ms, then
		// 40ms of backoff), long before the minute of the TTL.
		other := locker.NewMutex(b.Driver(), "k", opt, locker.WithTTL(time.Minute))
		start := time.Now()
		if err := other.LockContext(context.Background()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("the other process waited %v; want the release retried at once", d)
		}
		if n := f.calls.Load(); n != 3 {
			t.Errorf("%d Releases; want 3 (two failed)", n)
		}
		other.Unlock()
		for _, err := range errs() {
			if errors.Is(err, errFlaky) {
				t.Errorf("error handler: %v; want no report of a release that landed on a retry", err)
			}
		}
	})
}

// permanentRelease fails every Release with a permanent error.
type permanentRelease struct{ driver.Driver }

func (p permanentRelease) Release(context.Context, driver.Lease) error {
	return driver.Permanent(errors.New("client closed"))
}

// TestReleaseNotRetriedAfterPermanentError: a permanent error is not
// retried: the lease is left to expire.
func TestReleaseNotRetriedAfterPermanentError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		opt, _ := quiet(t)
		m := locker.NewMutex(permanentRelease{b.Driver()}, "k", opt, locker.WithTTL(time.Second))
		if err := m.LockContext(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := m.UnlockContext(context.Background()); err == nil {
			t.Fatal("UnlockContext = nil; want the permanent error")
		}
		synctest.Wait()
		if hs := b.Holders("k"); len(hs) != 1 {
			t.Errorf("holders = %+v; want the lease left to expire", hs)
		}
	})
}

// hangingRelease lets its first hangs Releases hang until their context
// ends, as a request to a replicated backend's dead leader does.
type hangingRelease struct {
	driver.Driver
	hangs atomic.Int32
	calls atomic.Int32
}

func (h *hangingRelease) Release(ctx context.Context, l driver.Lease) error {
	h.calls.Add(1)
	if h.hangs.Add(-1) >= 0 {
		<-ctx.Done()
		return ctx.Err()
	}
	return h.Driver.Release(ctx, l)
}

// TestReleaseHedged: a Release that does not answer (in flight when the
// leader died) is followed by another one after a fifth of the TTL, which
// lands: UnlockContext returns nil then, not at its deadline, and the key
// is free.
func TestReleaseHedged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		hr := &hangingRelease{Driver: b.Driver()}
		opt, _ := quiet(t)
		m := locker.NewMutex(hr, "k", opt, locker.WithTTL(5*time.Second))
		if err := m.LockContext(context.Background()); err != nil {
			t.Fatal(err)
		}
		hr.hangs.Store(1)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()
		if err := m.UnlockContext(ctx); err != nil {
			t.Fatalf("UnlockContext = %v; want nil (the second Release landed)", err)
		}
		if d := time.Since(start); d != time.Second {
			t.Errorf("UnlockContext took %v; want the hedge delay, 1s", d)
		}
		if n := hr.calls.Load(); n != 2 {
			t.Errorf("%d Releases; want 2", n)
		}
		if hs := b.Holders("k"); len(hs) != 0 {
			t.Errorf("holders = %+v; want none", hs)
		}
	})
}

// TestReleaseHedged_Unlock: the release of Unlock, whose context is never
// done, bounds its first call by the Client's shared hedge window: a
// Release that does not answer is followed by another one after the hedge
// delay (1s for a TTL of 5s), at most a sixteenth of it later, and the key
// is free. Twice: the second Unlock, a hedge delay later, needs a window of
// its own.
func TestReleaseHedged_Unlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		hr := &hangingRelease{Driver: b.Driver()}
		opt, _ := quiet(t)
		c := locker.New(hr, opt, locker.WithTTL(5*time.Second))
		defer c.Close(context.Background())
		for i, key := range []string{"a", "b"} {
			m := c.Mutex(key)
			m.Lock()
			hr.hangs.Store(1)
			hr.calls.Store(0)
			start := time.Now()
			m.Unlock()
			d := time.Since(start)
			if d < time.Second || d > time.Second+time.Second/16 {
				t.Errorf("Unlock %d took %v; want the hedge delay, 1s, up to 1/16 more", i, d)
			}
			if n := hr.calls.Load(); n != 2 {
				t.Errorf("Unlock %d: %d Releases; want 2", i, n)
			}
			if hs := b.Holders(key); len(hs) != 0 {
				t.Errorf("holders of %q = %+v; want none", key, hs)
			}
		}
	})
}
