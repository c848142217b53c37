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

// raiseTokenFloor is TryAcquire with req.MinToken ([driver.Request].MinToken),
// in one round trip: every later token of req.Key exceeds the floor, and
// req.Owner's hold of req.Key in req.Mode, if any, takes the floor as its
// token when its own is lower; the lease returned has the hold's token.
//
// The fence key keeps floor, as it keeps a token granted by this server
// (see Tokens in the package doc), while the server's clock has not passed
// floor; once it has, the clock alone exceeds floor. So the floor needs no
// state after that moment, and tokens exceed it as long as the server's
// clock does not step back. A floor that comes from another server's
// clock, ahead of this one, is kept until this server's clock catches up
// with it: the fence key lives as long as the two clocks differ. A restart
// that loses the data set loses a floor the clock has not yet passed. The
// hold's release keeps its token, and so the floor, in the same way.
func (d *Driver) raiseTokenFloor(ctx context.Context, req driver.Request) (driver.Lease, error) {
	const op = "raise-token-floor"
	if err := ctx.Err(); err != nil {
		return driver.Lease{}, opError(op, req.Key, err)
	}
	mode, err := modeArg(req.Mode)
	if err != nil {
		return driver.Lease{}, opError(op, req.Key, err)
	}
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
