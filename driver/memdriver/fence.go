package memdriver

import (
	"context"
	"time"

	"github.com/go-locker/locker/driver"
)

var _ driver.TokenFloor = (*Driver)(nil)

// RaiseTokenFloor implements [driver.TokenFloor]: it raises the key's fence
// counter to floor, so that the next grant's token is greater, and, when
// l.Owner holds l.Key in l.Mode with a lower token, makes floor that
// hold's token. The counter is never lowered. When l.Owner does not hold
// the key it returns an error wrapping [driver.ErrNotHeld] and changes
// nothing. The fault hooks apply as to [Driver.Refresh]; the
// call is not counted in [Backend.Stats].
func (d *Driver) RaiseTokenFloor(ctx context.Context, l driver.Lease, floor uint64) error {
	const op = "raise-token-floor"
	if err := d.begin(ctx); err != nil {
		return wrap(op, l.Key, err)
	}
	err := d.b.raiseFloor(op, l, floor)
	if d.replyLost() {
		return wrap(op, l.Key, ErrReplyLost)
	}
	return err
}

// raiseFloor is RaiseTokenFloor on the backend.
func (b *Backend) raiseFloor(op string, l driver.Lease, floor uint64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	ks := b.state(l.Key)
	ks.sweep(time.Now())
	h, ok := ks.holders[l.Owner]
	if !ok || ks.mode != l.Mode {
		return wrap(op, l.Key, driver.ErrNotHeld)
	}
	ks.fence = max(ks.fence, floor)
	h.token = max(h.token, floor)
	return nil
}
