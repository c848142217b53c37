package memdriver

import (
	"context"
	"time"

	"github.com/go-locker/locker/driver"
)

// raiseTokenFloor is TryAcquire with req.MinToken (see [Driver.TryAcquire]).
func (d *Driver) raiseTokenFloor(ctx context.Context, req driver.Request) (driver.Lease, error) {
	const op = "raise-token-floor"
	if err := d.begin(ctx); err != nil {
		return driver.Lease{}, d.errs.Wrap(ctx, op, req.Key, err)
	}
	l, err := d.b.raiseFloor(op, req)
	if d.replyLost() {
		return driver.Lease{}, d.errs.Wrap(ctx, op, req.Key, ErrReplyLost)
	}
	return l, err
}

// raiseFloor is raiseTokenFloor on the backend.
func (b *Backend) raiseFloor(op string, req driver.Request) (driver.Lease, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ks := b.state(req.Key)
	ks.sweep(time.Now())
	h, ok := ks.holders[req.Owner]
	if !ok || ks.mode != req.Mode {
		return driver.Lease{}, errs.Wrap(nil, op, req.Key, driver.ErrNotHeld)
	}
	ks.fence = max(ks.fence, req.MinToken)
	h.token = max(h.token, req.MinToken)
	return driver.Lease{Key: req.Key, Owner: req.Owner, Mode: req.Mode, Token: h.token}, nil
}
