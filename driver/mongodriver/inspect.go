package mongodriver

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/go-locker/locker/driver"
)

var _ driver.Inspector = (*Driver)(nil)

// Inspect implements driver.Inspector with two reads: the key's current
// version and the server's clock (the latter at most once a second). A
// hold's Remaining is counted from the lower bound of the server's clock,
// so it may exceed the holder's own by the clock's uncertainty (a round
// trip). There is no wait queue: Waiting is 0.
func (d *Driver) Inspect(ctx context.Context, key string) (driver.KeyState, error) {
	var st driver.KeyState
	err := d.do(ctx, "inspect", key, 0, func(ctx context.Context) error {
		cur, err := d.top(ctx, key)
		if err != nil {
			return err
		}
		now, err := d.clock.now(ctx)
		if err != nil {
			return err
		}
		st = state(cur, now.lo)
		return nil
	})
	if err != nil {
		return driver.KeyState{}, err
	}
	return st, nil
}

// state is what Inspect reports of cur at lo.
func state(cur *version, lo int64) driver.KeyState {
	st := driver.KeyState{Fence: uint64(cur.Fence)}
	holds := cur.live(lo)
	slices.SortFunc(holds, func(a, b hold) int { return cmp.Compare(a.Token, b.Token) })
	for _, h := range holds {
		st.Mode, st.Limit = driver.Mode(h.Mode), h.Limit
		st.Holders = append(st.Holders, driver.Holder{
			Owner: h.Owner, Token: uint64(h.Token), Weight: h.Weight, Value: string(h.Value),
			Remaining: time.Duration(h.End-lo) * time.Microsecond,
		})
	}
	return st
}

// ForceRelease implements driver.Inspector: one change that removes every
// hold of key, keeping its fence. Waiters poll: none is woken.
func (d *Driver) ForceRelease(ctx context.Context, key string) (int, error) {
	var n int
	err := d.do(ctx, "force-release", key, 0, func(ctx context.Context) error {
		return d.apply(ctx, key, 0, func(cur *version, now span) (*version, func(*version) bool, error) {
			gone := cur.live(now.lo)
			n = len(gone)
			if len(cur.Holds) == 0 {
				return nil, nil, nil
			}
			return cur.next(nil, cur.Fence), func(top *version) bool { return lacks(top, gone) }, nil
		})
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
