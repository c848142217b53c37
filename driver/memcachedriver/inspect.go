package memcachedriver

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/go-locker/locker/driver"
)

var _ driver.Inspector = (*Driver)(nil)

// Inspect implements driver.Inspector in two round trips: the fence
// counter and the hold item. A hold whose grant is still pending (claimed,
// its token not yet written) is not listed. The holder's remaining time is
// counted on this client's clock from the end its holder wrote; memcached
// may keep the item up to 3s longer (see docs/memcachedriver.md).
// memcached has no wait queue: Waiting is 0. An ended ctx or a closed
// Driver is reported before any request.
func (d *Driver) Inspect(ctx context.Context, key string) (driver.KeyState, error) {
	const op = "inspect"
	hk, fk := itemKeys(d.prefix, key)
	st, err := call(ctx, d, func(ctx context.Context) (driver.KeyState, error) {
		var st driver.KeyState
		it, err := d.client.Get(fk)
		switch {
		case err == nil:
			st.Fence, _ = strconv.ParseUint(strings.TrimSpace(string(it.Value)), 10, 64)
		case !errors.Is(err, memcache.ErrCacheMiss):
			return st, err
		}
		if err := d.live(ctx); err != nil {
			return st, err
		}
		_, r, err := d.gets(hk)
		switch {
		case errors.Is(err, memcache.ErrCacheMiss):
			return st, nil
		case err != nil:
			return st, err
		case r.token == 0:
			return st, nil // pending: not granted yet
		}
		st.Mode = driver.Exclusive
		st.Holders = []driver.Holder{{Owner: r.owner, Token: r.token, Remaining: max(time.Until(time.UnixMilli(r.end)), 0)}}
		return st, nil
	}, nil)
	if err != nil {
		return driver.KeyState{}, d.errs.Wrap(ctx, op, key, err)
	}
	return st, nil
}

// ForceRelease implements driver.Inspector: whoever holds key (a pending
// claim included), the hold item is replaced, by a compare-and-swap of the
// item read, with one that has already expired. The fence counter is
// kept. Waiters poll, so none is woken.
func (d *Driver) ForceRelease(ctx context.Context, key string) (int, error) {
	const op = "force-release"
	hk, _ := itemKeys(d.prefix, key)
	_, err := call(ctx, d, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, d.rewrite(ctx, hk, func(record) bool { return true }, func(it *memcache.Item, _ record) error {
			return casResult(d.client.CompareAndSwap(&memcache.Item{Key: hk, Value: nil, Expiration: -1, CasID: it.CasID}))
		})
	}, nil)
	switch {
	case errors.Is(err, driver.ErrNotHeld):
		return 0, nil
	case err != nil:
		return 0, d.errs.Wrap(ctx, op, key, err)
	}
	return 1, nil
}
