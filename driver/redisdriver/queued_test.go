package redisdriver_test

import (
	"context"

	"github.com/go-locker/locker/driver"
)

// tryQueued is TryAcquire with Request.Queued.
func tryQueued(d driver.Driver, ctx context.Context, r driver.Request) (driver.Lease, error) {
	r.Queued = true
	return d.TryAcquire(ctx, r)
}

// floorReq asks for a token floor (Request.MinToken) for the hold l.
func floorReq(l driver.Lease, floor uint64) driver.Request {
	return driver.Request{Key: l.Key, Owner: l.Owner, Mode: l.Mode, TTL: l.TTL, MinToken: floor}
}
