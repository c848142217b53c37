package memdriver

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/go-locker/locker/driver"
)

// Inspect implements [driver.Inspector]: it reports the live holds of key
// (dropping the expired ones, as every operation does), its fence counter
// and the live entries of its wait queue. It honours [Driver.Block],
// [Driver.FailNext] and Close, and is not counted in [Stats].
func (d *Driver) Inspect(ctx context.Context, key string) (driver.KeyState, error) {
	const op = "inspect"
	if err := d.begin(ctx); err != nil {
		return driver.KeyState{}, d.errs.Wrap(ctx, op, key, err)
	}
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	var st driver.KeyState
	ks := b.keys[key]
	if ks == nil {
		return st, nil
	}
	now := time.Now()
	ks.sweep(now)
	st.Fence, st.Waiting = ks.fence, len(ks.queue)
	if len(ks.holders) > 0 {
		st.Mode, st.Limit = ks.mode, ks.limit
	}
	for owner, h := range ks.holders {
		st.Holders = append(st.Holders, driver.Holder{Owner: owner, Token: h.token,
			Remaining: h.expires.Sub(now), Weight: h.weight, Value: h.value})
	}
	slices.SortFunc(st.Holders, func(a, b driver.Holder) int { return cmp.Compare(a.Token, b.Token) })
	return st, nil
}

// ForceRelease implements [driver.Inspector]: it ends every hold of key as
// [Backend.Expire] does (the holds' watchers learn of the loss), and
// reports how many there were. The fence counter and the wait queue are
// kept.
func (d *Driver) ForceRelease(ctx context.Context, key string) (int, error) {
	const op = "force-release"
	if err := d.begin(ctx); err != nil {
		return 0, d.errs.Wrap(ctx, op, key, err)
	}
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	ks := b.keys[key]
	if ks == nil {
		return 0, nil
	}
	ks.sweep(time.Now())
	n := len(ks.holders)
	for owner := range ks.holders {
		ks.drop(owner, "hold ended by ForceRelease")
	}
	if n > 0 {
		ks.notify()
	}
	return n, nil
}

var _ driver.Inspector = (*Driver)(nil)
