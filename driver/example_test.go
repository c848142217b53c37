package driver_test

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
)

// counting wraps any driver and counts the attempts that reach it. It
// forwards notifications and passes the wrapped driver's Capabilities on,
// with the flags of the parts it does not forward cleared: one type for
// every driver, whatever it can do.
type counting struct {
	driver.Driver
	attempts atomic.Int64
}

func (c *counting) TryAcquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	c.attempts.Add(1)
	return c.Driver.TryAcquire(ctx, req)
}

// Subscribe is called only when the Capabilities report Notify, which
// they do only when the wrapped driver is a Notifier.
func (c *counting) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	return c.Driver.(driver.Notifier).Subscribe(ctx, key)
}

func (c *counting) Capabilities() driver.Capabilities {
	caps := driver.CapabilitiesOf(c.Driver)
	caps.Acquire, caps.WatchLoss, caps.RefreshBatch, caps.Inspect = false, false, false, false
	return caps
}

// A wrapper passes capabilities on as data: the front-end uses what the
// Capabilities report, so the wrapper needs no type per combination of
// the wrapped driver's optional interfaces.
func ExampleDescriber() {
	d := &counting{Driver: memdriver.New()}
	c := locker.New(d)
	defer c.Close(context.Background())

	rw := c.RWMutex("config")
	rw.RLock() // Shared passes through
	rw.RUnlock()
	caps := driver.CapabilitiesOf(d)
	fmt.Println("attempts:", d.attempts.Load())
	fmt.Println("shared:", caps.Shared, "notify:", caps.Notify, "acquire:", caps.Acquire)
	// Output:
	// attempts: 1
	// shared: true notify: true acquire: false
}
