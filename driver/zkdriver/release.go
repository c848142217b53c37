package zkdriver

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/go-locker/locker/driver"
	"github.com/go-zookeeper/zk"
)

// Release implements driver.Driver: it deletes l's node (one round trip),
// a hold's, a queue place's or a lost create's. It returns
// driver.ErrNotHeld when l was not held (another Driver's is left held).
func (d *Driver) Release(ctx context.Context, l driver.Lease) error {
	return d.final(ctx, d.release(ctx, l))
}

func (d *Driver) release(ctx context.Context, l driver.Lease) error {
	const op = "release"
	if err := d.begin(ctx, op, l.Key); err != nil {
		return err
	}
	d.mu.Lock()
	n := d.nodes[nodeKey{l.Key, l.Owner}]
	d.mu.Unlock()
	if n == nil {
		return errorf(op, l.Key, fmt.Errorf("%w: no hold of this driver", driver.ErrNotHeld))
	}
	d.mu.Lock()
	path, granted, session := n.path, n.granted, n.session
	d.mu.Unlock()
	switch {
	case granted: // a hold: the checks of Refresh
		if _, err := d.lookup(ctx, op, l); err != nil {
			return err
		}
	case path == "": // a create of unknown outcome: find its node
		var err error
		if path, err = d.findLost(ctx, op, n, driver.Request{Key: l.Key, Owner: l.Owner}); err != nil || path == "" {
			return cmp.Or(err, errorf(op, l.Key, fmt.Errorf("%w: no such hold", driver.ErrNotHeld)))
		}
	case session != d.conn.SessionID(): // a queue place of an ended session
		d.forget(n)
		return errorf(op, l.Key, fmt.Errorf("%w: %w", driver.ErrNotHeld, errSessionEnded))
	}
	err := d.del(ctx, path, -1)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return callFailed(ctx, op, l.Key, err)
	}
	d.forget(n)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return errorf(op, l.Key, fmt.Errorf("%w: %w", driver.ErrNotHeld, errNodeGone))
	case !granted:
		return errorf(op, l.Key, fmt.Errorf("%w: queued, not granted (the queue place was removed)", driver.ErrNotHeld))
	}
	return nil
}
