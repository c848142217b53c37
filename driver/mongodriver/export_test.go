package mongodriver

import (
	"context"
	"time"

	"github.com/go-locker/locker/driver"
)

// Version is a version of a key, as a writer reads it.
type Version = version

// Top reads key's current version.
func (d *Driver) Top(ctx context.Context, key string) (*Version, error) { return d.top(ctx, key) }

// AcquireFrom makes one attempt of TryAcquire as a writer whose read of
// the key returned cur, and reports whether its insert succeeded and
// whether the grant is in force.
func (d *Driver) AcquireFrom(ctx context.Context, cur *Version, req driver.Request) (inserted, inForce bool, err error) {
	done, err := d.try(ctx, cur, false, func(cur *version, now span) (*version, func(*version) bool, error) {
		next, h, err := grant(cur, req, now)
		return next, func(top *version) bool {
			inserted = true // checked only after an insert that succeeded
			return has(top, h)
		}, err
	})
	return inserted, done && err == nil, err
}

// WaitCollected waits until d's collector has deleted every old version
// it was handed.
func (d *Driver) WaitCollected() {
	for {
		d.gc.mu.Lock()
		running := d.gc.running
		d.gc.mu.Unlock()
		if !running {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
