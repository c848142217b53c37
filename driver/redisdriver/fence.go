package redisdriver

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/go-locker/locker/driver"
)

//go:embed fence.lua
var fenceLua string

var fenceScript = newScript("", fenceLua)

// raiseTokenFloor is TryAcquire with req.MinToken, a token floor (see
// Driver.TryAcquire), in one round trip; the lease it returns has the
// hold's token.
func (d *Driver) raiseTokenFloor(ctx context.Context, req driver.Request) (driver.Lease, error) {
	const op = "raise-token-floor"
	if err := ctx.Err(); err != nil {
		return driver.Lease{}, opError(op, req.Key, err)
	}
	mode := modeArg(req.Mode)
	floor := req.MinToken
	if floor >= 1<<53 {
		return driver.Lease{}, opError(op, req.Key, driver.Permanent(fmt.Errorf("floor %d outside (0, 2^53)", floor)))
	}
	res, err := d.run(ctx, fenceScript, fenceScript.args(d.base(req.Key), req.Owner, mode, floor))
	if err != nil {
		return driver.Lease{}, opError(op, req.Key, err)
	}
	tok, ok := res.(int64)
	switch {
	case ok && tok > 0:
		return driver.Lease{Key: req.Key, Owner: req.Owner, Mode: req.Mode, Token: uint64(tok)}, nil
	case ok && tok == 0:
		return driver.Lease{}, opError(op, req.Key, driver.ErrNotHeld)
	}
	return driver.Lease{}, opError(op, req.Key, errBadReply(res))
}
