package zkdriver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/zkdriver/zk"
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
	path, granted, lost := n.path, n.granted, n.lost
	session := n.session
	matches := n.mode == l.Mode && (l.Token == 0 || uint64(n.czxid) == l.Token)
	stale := time.Since(n.written) >= n.ttl
	d.mu.Unlock()
	if path == "" {
		var err error
		if path, err = d.findLost(ctx, op, n, driver.Request{Key: l.Key, Owner: l.Owner}); err != nil {
			return err
		}
		if path == "" {
			return errorf(op, l.Key, fmt.Errorf("%w: no such hold", driver.ErrNotHeld))
		}
		session = d.conn.SessionID()
	}
	if granted && !matches {
		return errorf(op, l.Key, fmt.Errorf("%w: the owner's hold is another one", driver.ErrNotHeld))
	}
	if lost != nil || session != d.conn.SessionID() {
		d.forget(n)
		return errorf(op, l.Key, fmt.Errorf("%w: %w", driver.ErrNotHeld, errSessionEnded))
	}
	if granted && stale {
		return d.expired(ctx, op, n)
	}
	err := del(ctx, d.conn, path, -1)
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
