package quorumdriver_test

import (
	"context"
	"fmt"

	"github.com/go-locker/locker/driver"
)

// tryQueued is TryAcquire with Request.Queued.
func tryQueued(d driver.Driver, ctx context.Context, r driver.Request) (driver.Lease, error) {
	r.Queued = true
	return d.TryAcquire(ctx, r)
}

// raiseFloor is TryAcquire with Request.MinToken floor by the owner of l.
// A success must return the hold's lease with a token of at least floor.
func raiseFloor(d driver.Driver, ctx context.Context, l driver.Lease, floor uint64) error {
	got, err := d.TryAcquire(ctx, driver.Request{Key: l.Key, Owner: l.Owner, Mode: l.Mode, TTL: l.TTL, MinToken: floor})
	if err == nil && (got.Token < floor || got.Key != l.Key || got.Owner != l.Owner || got.Mode != l.Mode) {
		return fmt.Errorf("token floor %d = %+v; want the hold's lease with a token of at least the floor", floor, got)
	}
	return err
}
