package zkdriver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
	"github.com/go-locker/locker/driver/zkdriver/zk"
)

// Release implements driver.Driver: it deletes l's node (one round trip)
// if l is a live hold of this driver, and any node the owner has in the
// key's queue. It returns driver.ErrNotHeld when l was not held: never
// granted, released, of an ended session, or past its lease by this
// client's clock (its node is deleted all the same).
func (d *Driver) Release(ctx context.Context, l driver.Lease) error {
	return d.final(ctx, "release", l.Key, d.release(ctx, l))
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
		// Not known here: a node of this owner may still exist (a
		// create whose reply was lost, by an earlier incarnation of
		// this driver). Look for it by name.
		return d.releaseByName(ctx, op, l)
	}
	d.mu.Lock()
	path, granted, lost := n.path, n.granted, n.lost
	session := n.session
	matches := n.mode == l.Mode && (l.Token == 0 || uint64(n.czxid) == l.Token)
	stale := time.Since(n.written) >= n.ttl
	ttl := n.ttl
	d.mu.Unlock()
	if path == "" {
		d.forget(n)
		return d.releaseByName(ctx, op, l)
	}
	if granted && !matches {
		return errorf(op, l.Key, fmt.Errorf("%w: the owner's hold is another one", driver.ErrNotHeld))
	}
	if lost != nil || session != d.conn.SessionID() {
		d.forget(n)
		return errorf(op, l.Key, fmt.Errorf("%w: %w", driver.ErrNotHeld, errSessionEnded))
	}
	if granted && stale {
		_, err := d.recheck(ctx, op, n, ttl, true)
		return err
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

// releaseByName releases a lease this driver does not know: granted by
// another driver, or left by a create whose outcome was not known. It
// deletes the nodes of l.Owner in the key's queue, and returns nil if one
// of them was a hold matching l (in l.Mode, first in the queue or behind
// shared nodes only, with token l.Token unless it is 0).
func (d *Driver) releaseByName(ctx context.Context, op string, l driver.Lease) error {
	parent := d.parentPath(l.Key)
	names, err := driverkit.Call(ctx, func() ([]string, error) {
		names, _, err := d.conn.Children(parent)
		return names, err
	}, nil)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return callFailed(ctx, op, l.Key, err)
	}
	q := parseQueue(names)
	released := false
	for _, c := range q.ofOwner(l.Owner) {
		p := parent + "/" + c.name
		version := int32(-1)
		match := false
		if ok, _ := q.judge(q.index(c.name), c.mode, c.limit, c.weight); ok && c.mode == l.Mode {
			got, err := driverkit.Call(ctx, func() (getResult, error) {
				data, st, err := d.conn.Get(p)
				return getResult{data, st}, err
			}, nil)
			if err == nil && (l.Token == 0 || uint64(got.st.Czxid) == l.Token) {
				match, version = true, got.st.Version
			}
		}
		_, err := driverkit.Call(ctx, func() (struct{}, error) { return struct{}{}, d.conn.Delete(p, version) }, nil)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return callFailed(ctx, op, l.Key, err)
		}
		if err == nil && match {
			released = true
		}
	}
	if released {
		return nil
	}
	return errorf(op, l.Key, fmt.Errorf("%w: no such hold", driver.ErrNotHeld))
}
