package memcachedriver

import (
	"context"

	"github.com/go-locker/locker/driver"
)

// errClosed is ErrClosed as calls return it.
var errClosed = driver.Permanent(ErrClosed)

// live returns an error when a call must not send another request: its
// context has ended, or the driver was closed.
func (d *Driver) live(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-d.closed:
		return errClosed
	default:
		return nil
	}
}

// call is one driver call that runs on a goroutine of its own.
type call struct {
	err       error
	done      chan struct{} // closed when f has returned
	abandoned bool          // the caller returned first; guarded by Driver.mu
}

// do runs f, the requests of one call by owner, and returns its error.
// gomemcache takes no context, so f runs on a goroutine of its own and do
// returns as soon as ctx ends, with ctx's error, or the driver is closed,
// with ErrClosed, whichever comes first; f then sees the same through
// live before its next request and stops, and the request it is waiting
// for ends within the client's Timeout. Its result is dropped.
//
// A call that the caller abandoned this way is counted for owner until f
// returns, for settle.
func (d *Driver) do(ctx context.Context, owner string, f func(ctx context.Context) error) error {
	if err := d.live(ctx); err != nil {
		return err
	}
	d.mu.Lock()
	if d.isClosed {
		d.mu.Unlock()
		return errClosed
	}
	d.running.Add(1)
	d.mu.Unlock()
	c := &call{done: make(chan struct{})}
	go func() {
		defer d.running.Done()
		c.err = f(ctx)
		d.mu.Lock()
		if c.abandoned {
			a := d.abandoned[owner]
			if a.n--; a.n == 0 {
				close(a.done)
				delete(d.abandoned, owner)
			}
		}
		close(c.done)
		d.mu.Unlock()
	}()
	var err error
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		err = ctx.Err()
	case <-d.closed:
		err = errClosed
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-c.done:
		// f returned meanwhile: its result is better than a guess.
		return c.err
	default:
	}
	c.abandoned = true
	a := d.abandoned[owner]
	if a == nil {
		a = &abandonedCalls{done: make(chan struct{})}
		d.abandoned[owner] = a
	}
	a.n++
	return err
}

// settle waits until no call of owner that its caller abandoned still
// runs, or ctx ends, or the driver is closed. A Release calls it first:
// an acquire that its caller gave up on may still be writing a hold for
// owner, which the Release is meant to remove.
func (d *Driver) settle(ctx context.Context, owner string) error {
	d.mu.Lock()
	a := d.abandoned[owner]
	d.mu.Unlock()
	if a == nil {
		return nil
	}
	select {
	case <-a.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-d.closed:
		return errClosed
	}
}
