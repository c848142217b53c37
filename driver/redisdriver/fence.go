package redisdriver

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/go-locker/locker/driver"
)

var _ driver.TokenFloor = (*Driver)(nil)

//go:embed fence.lua
var fenceLua string

var fenceScript = newScript("", fenceLua)

// RaiseTokenFloor implements [driver.TokenFloor] in one round trip: every
// later token of l.Key exceeds floor, and l.Owner's hold of l.Key in
// l.Mode, if any, takes floor as its token when its own is lower.
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
func (d *Driver) RaiseTokenFloor(ctx context.Context, l driver.Lease, floor uint64) error {
	const op = "raise-token-floor"
	if err := ctx.Err(); err != nil {
		return opError(op, l.Key, err)
	}
	mode, err := modeArg(l.Mode)
	if err != nil {
		return opError(op, l.Key, err)
	}
	if floor == 0 || floor >= 1<<53 {
		return opError(op, l.Key, driver.Permanent(fmt.Errorf("floor %d outside (0, 2^53)", floor)))
	}
	res, err := d.run(ctx, fenceScript, fenceScript.args(d.base(l.Key), l.Owner, mode, floor))
	if err != nil {
		return opError(op, l.Key, err)
	}
	switch res {
	case int64(1):
		return nil
	case int64(0):
		return opError(op, l.Key, driver.ErrNotHeld)
	}
	return opError(op, l.Key, errBadReply(res))
}
