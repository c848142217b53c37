package zkdriver

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-zookeeper/zk"
)

// Inspect implements driver.Inspector: it lists the key's queue and reads
// each holder's node. Tokens are czxids, Fence the largest; Remaining is
// an estimate (the TTL less the time since the node's mtime).
func (d *Driver) Inspect(ctx context.Context, key string) (driver.KeyState, error) {
	const op = "inspect"
	if err := d.begin(ctx, op, key); err != nil {
		return driver.KeyState{}, err
	}
	parent, _ := d.paths(key)
	holders, waiting, err := d.holders(ctx, parent)
	if err != nil {
		return driver.KeyState{}, errorf(op, key, err)
	}
	st := driver.KeyState{Waiting: waiting}
	for _, c := range holders {
		data, zst, err := d.get(ctx, parent+"/"+c.name)
		if errors.Is(err, zk.ErrNoNode) {
			continue // released meanwhile
		}
		if err != nil {
			return driver.KeyState{}, errorf(op, key, err)
		}
		// A foreign node may have no owner (then its name is reported) and
		// its data is its value as it is (Curator's: its client's IP).
		h := driver.Holder{Owner: cmp.Or(c.owner, c.name), Token: uint64(zst.Czxid), Weight: c.weight, Value: string(data)}
		if ttl, ok := decodeTTL(data); ok && !c.foreign {
			h.Value = decodeValue(data)
			h.Remaining = max(ttl-time.Since(time.UnixMilli(zst.Mtime)), 0)
		}
		st.Holders = append(st.Holders, h)
		st.Fence = max(st.Fence, h.Token)
		st.Mode, st.Limit = c.mode, c.limit
	}
	return st, nil
}

// holders lists the queue under parent and returns its granted nodes and
// the number of waiting ones.
func (d *Driver) holders(ctx context.Context, parent string) ([]child, int, error) {
	q, err := d.list(ctx, parent)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	n := q.held()
	return q[:n], len(q) - n, nil
}

// ForceRelease implements driver.Inspector: it deletes every holder's node.
func (d *Driver) ForceRelease(ctx context.Context, key string) (int, error) {
	const op = "force-release"
	if err := d.begin(ctx, op, key); err != nil {
		return 0, err
	}
	parent, _ := d.paths(key)
	holders, _, err := d.holders(ctx, parent)
	if err != nil {
		return 0, errorf(op, key, err)
	}
	n := 0
	for _, c := range holders {
		switch err := d.del(ctx, parent+"/"+c.name, -1); {
		case err == nil:
			n++
		case errors.Is(err, zk.ErrNoNode):
		default:
			return n, errorf(op, key, err)
		}
	}
	return n, nil
}

var _ driver.Inspector = (*Driver)(nil)
