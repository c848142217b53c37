package locker_test

import (
	"context"
	"errors"
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
