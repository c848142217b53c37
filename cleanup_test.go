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

// flakyRelease fails its first fails Releases with a transient error,
// without touching the backend.
type flakyRelease struct {
	driver.Driver
	fails atomic.Int32
	calls atomic.Int32
}

var errFlaky = errors.New("connection reset")

func (f *flakyRelease) Release(ctx context.Context, l driver.Lease) error {
	f.calls.Add(1)
	if f.fails.Add(-1) >= 0 {
		return errFlaky
	}
	return f.Driver.Release(ctx, l)
}

// TestCleanupRetriesRelease: the background cleanup of an abandoned call
// tries its Release again while the outcome is unknown, so that what the
// call left (here a grant whose reply was lost) does not block the key
// until its TTL; the error handler hears of no failure.
func TestCleanupRetriesRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		d := b.Driver()
		f := &flakyRelease{Driver: d}
		f.fails.Store(2)
		opt, errs := quiet(t)
		m := locker.NewMutex(f, "k", opt, locker.WithTTL(time.Minute))
		d.LoseReplies(1) // the grant is applied, its reply lost
		ok, err := m.TryLockContext(context.Background())
		if ok || !errors.Is(err, memdriver.ErrReplyLost) {
			t.Fatalf("TryLockContext = %v, %v; want false and the lost reply", ok, err)
		}
		time.Sleep(time.Second) // the cleanup's backoff: 20ms, then 40ms
		synctest.Wait()
		if hs := b.Holders("k"); len(hs) != 0 {
			t.Fatalf("holders after the cleanup = %+v; want none", hs)
		}
		if n := f.calls.Load(); n != 3 {
			t.Errorf("the cleanup sent %d Releases; want 3 (two failed)", n)
		}
		for _, err := range errs() {
			if errors.Is(err, errFlaky) {
				t.Errorf("error handler: %v; want no report of a cleanup that succeeded on a retry", err)
			}
		}
	})
}
