package memcachedriver

import (
	"context"
	"sync/atomic"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
)

// live returns an error when a call must not send another request: its
// context has ended, or the driver was closed.
func (d *Driver) live(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return d.closedErr(nil)
}

// closedErr is the Closed of the driver's Errors: driver.ErrClosed once
// Close was called.
func (d *Driver) closedErr(error) error {
	if d.closed.Err() != nil {
		return driver.ErrClosed
	}
	return nil
}

// call runs f, the requests of one call, with driverkit.Call: gomemcache
// takes no context, so f runs on a goroutine of its own, and call returns
// as soon as ctx ends or the driver is closed, with the context's error;
// f then sees the same through live before its next request and stops,
// and the request it waits for ends within the client's Timeout. When
// the caller returned first, undo (if not nil) gets what f returned, to
// take back a grant nobody will use. Close waits for f; undo, which runs
// after it, finds a closed driver not live.
func call[T any](ctx context.Context, d *Driver, f func(ctx context.Context) (T, error), undo func(T, error)) (T, error) {
	var zero T
	if err := d.live(ctx); err != nil {
		return zero, err
	}
	d.mu.Lock()
	if d.closed.Err() != nil {
		d.mu.Unlock()
		return zero, driver.ErrClosed
	}
	d.running.Add(1)
	d.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(d.closed, cancel)
	defer func() {
		stop()
		cancel()
	}()
	// driverkit.Call does not run f when ctx has ended before f begins
	// (it may end after live): the count taken above is then given back
	// here, and a goroutine that begins f too late does nothing.
	var claimed atomic.Bool // by f, or here when f never begins
	v, err := driverkit.Call(ctx, func() (T, error) {
		if !claimed.CompareAndSwap(false, true) {
			return zero, ctx.Err()
		}
		defer d.running.Done()
		return f(ctx)
	}, undo)
	if err != nil && claimed.CompareAndSwap(false, true) {
		d.running.Done()
	}
	return v, err
}
