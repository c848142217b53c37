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

// slowSubscribe is a memdriver.Driver with only driver.Notifier besides
// the Driver methods (no Acquirer, which would wait without subscribing),
// whose Subscribe takes until its context ends, as a dial to the backend
// can.
type slowSubscribe struct{ d *memdriver.Driver }

func (s slowSubscribe) TryAcquire(ctx context.Context, r driver.Request) (driver.Lease, error) {
	return s.d.TryAcquire(ctx, r)
}
func (s slowSubscribe) Refresh(ctx context.Context, l driver.Lease) (driver.Lease, error) {
	return s.d.Refresh(ctx, l)
}
func (s slowSubscribe) Release(ctx context.Context, l driver.Lease) error { return s.d.Release(ctx, l) }

func (s slowSubscribe) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestSubscribeCanceledNotReported: a lock call whose context ends while
// it subscribes to the key's releases returns the context's error, and the
// subscription's failure, which the end of the call caused, is not an
// error to report (the LeaderLatch checks saw it on redisdriver when a
// waiting candidate's latch stopped).
func TestSubscribeCanceledNotReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		var reported atomic.Int32
		c := locker.New(slowSubscribe{b.Driver()}, locker.WithErrorHandler(func(err error) {
			reported.Add(1)
			t.Errorf("error handler: %v", err)
		}))
		defer c.Close(context.Background())
		holder := locker.New(b.Driver())
		defer holder.Close(context.Background())
		if _, err := holder.Mutex("k").Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := c.Mutex("k").LockContext(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("LockContext: %v; want DeadlineExceeded", err)
		}
		synctest.Wait()
		if n := reported.Load(); n != 0 {
			t.Errorf("%d errors reported for a call that ended with its context", n)
		}
	})
}
