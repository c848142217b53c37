package sqldriver_test

import (
	"context"

	"github.com/go-locker/locker/driver"
)

// tryQueued is TryAcquire with Request.Queued.
func tryQueued(d driver.Driver, ctx context.Context, r driver.Request) (driver.Lease, error) {
	r.Queued = true
	return d.TryAcquire(ctx, r)
}
