package zkdriver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-zookeeper/zk"
)

// TryAcquire implements driver.Driver. It creates the owner's lock node
// (one round trip when the key is free) and keeps it if nothing before it
// in the queue blocks it; otherwise it deletes it and returns a
// *driver.LockedError (a *driver.LimitError for a node of another limit).
// While the key is contended it lists the queue first (peek). A holder's
// TryAcquire refreshes its node; one after a lost reply finds its node.
func (d *Driver) TryAcquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	l, err := d.tryAcquire(ctx, req)
	return d.finalLease(ctx, l, err)
}

func (d *Driver) tryAcquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	const op = "acquire"
	if err := d.beginRequest(ctx, op, req); err != nil {
		return driver.Lease{}, err
	}
	parent, prefix := d.lockPaths(req)
	d.mu.Lock()
	n := d.nodes[nodeKey{req.Key, req.Owner}]
	d.mu.Unlock()
	if n != nil {
		l, done, err := d.resume(ctx, op, n, req, false)
		if done {
			return l, err
		}
	}
	if d.hot.Hot(req.Key) {
		if err := d.peek(ctx, op, req, parent); err != nil {
			return driver.Lease{}, err
		}
	}
	n, r, err := d.create(ctx, op, req, parent, prefix)
	if err != nil {
		return driver.Lease{}, err
	}
	if r.numChildren == 1 {
		return d.grant(n, false), nil
	}
	return d.settle(ctx, op, n, req)
}

// peek lists key's queue and returns a *driver.LockedError if req would
// have to wait (after reclaiming an expired first node), nil otherwise.
func (d *Driver) peek(ctx context.Context, op string, req driver.Request, parent string) error {
	q, err := d.list(ctx, parent)
	if err != nil {
		if ctx.Err() != nil {
			return errorf(op, req.Key, ctx.Err())
		}
		return nil // a missing key node, or a failure the create reports
	}
	if err := d.checkForeignLayout(parent, q); err != nil {
		return errorf(op, req.Key, err)
	}
	granted, remaining, lerr, err := d.admits(ctx, parent, q, len(q), req.Mode, req.Limit, req.Weight)
	switch {
	case lerr != nil:
		return errorf(op, req.Key, lerr)
	case err != nil && ctx.Err() != nil:
		return errorf(op, req.Key, ctx.Err())
	case granted || err != nil:
		return nil
	}
	d.hot.Refused(req.Key)
	return &driver.LockedError{Remaining: remaining}
}

// admits judges the node at index i of q (see queue.judge), reclaiming
// q[0] first when it is in the way and its lease expired.
func (d *Driver) admits(ctx context.Context, parent string, q queue, i int, m driver.Mode, limit, weight int64) (granted bool, remaining time.Duration, lerr *driver.LimitError, err error) {
	granted, lerr = q.judge(i, m, limit, weight)
	if granted || lerr != nil || !q.inWay(i, m, limit) {
		return granted, 0, lerr, nil
	}
	gone, remaining, err := d.reclaim(ctx, parent, q[0])
	if err == nil && gone {
		granted, _ = q[1:].judge(i-1, m, limit, weight)
	}
	return granted, remaining, nil, err
}

// settle lists the queue after n was created behind other nodes: n is
// granted if nothing (live) before it blocks it, else deleted and refused.
func (d *Driver) settle(ctx context.Context, op string, n *node, req driver.Request) (driver.Lease, error) {
	q, err := d.list(ctx, n.parent)
	if err != nil {
		d.dropNode(ctx, n)
		return driver.Lease{}, callFailed(ctx, op, req.Key, err)
	}
	if err := d.checkForeignLayout(n.parent, q); err != nil {
		d.dropNode(ctx, n)
		return driver.Lease{}, errorf(op, req.Key, err)
	}
	name := n.path[len(n.parent)+1:]
	i := q.index(name)
	if i < 0 {
		d.forget(n)
		return driver.Lease{}, errorf(op, req.Key, errNodeGone)
	}
	granted, remaining, lerr, _ := d.admits(ctx, n.parent, q, i, req.Mode, n.limit, n.weight)
	if lerr != nil {
		// Never granted: drop the node (in the background if that fails).
		if err := d.dropNode(ctx, n); err != nil && ctx.Err() == nil {
			return driver.Lease{}, callFailed(ctx, op, req.Key, err)
		}
		return driver.Lease{}, errorf(op, req.Key, lerr)
	}
	if granted {
		// A counted node with waiters behind it, which watch it
		// (aimCounted): rewrite it (n.ttl is req.TTL). After a failure
		// other than errNodeGone they learn at its next renewal.
		if n.limit > 0 && i < len(q)-1 {
			if err := d.rewrite(ctx, n, req.TTL); errors.Is(err, errNodeGone) {
				return driver.Lease{}, errorf(op, req.Key, err)
			}
		}
		return d.grant(n, false), nil
	}
	d.hot.Refused(req.Key)
	if err := d.dropNode(ctx, n); err != nil {
		// The node may still be there: the front-end cleans up.
		return driver.Lease{}, callFailed(ctx, op, req.Key, err)
	}
	return driver.Lease{}, &driver.LockedError{Remaining: remaining}
}

// resume continues with the node this driver has for req's owner: a hold
// (refresh it, same token), a create of unknown outcome (find it), or a
// queue place. done=false: the caller creates a new node.
func (d *Driver) resume(ctx context.Context, op string, n *node, req driver.Request, wait bool) (driver.Lease, bool, error) {
	d.mu.Lock()
	path, granted, lost, mode, session := n.path, n.granted, n.lost, n.mode, n.session
	expired := granted && time.Since(n.written) >= n.ttl
	d.mu.Unlock()
	if lost != nil || (path != "" && session != d.conn.SessionID()) {
		d.forget(n)
		return driver.Lease{}, false, nil
	}
	if mode != req.Mode {
		return driver.Lease{}, true, driver.Permanent(errorf(op, req.Key, fmt.Errorf("owner %.8s… already has a %v node", req.Owner, mode)))
	}
	if path == "" {
		var err error
		if path, err = d.findLost(ctx, op, n, req); err != nil || path == "" {
			return driver.Lease{}, err != nil, err
		}
	}
	if expired {
		// Others may consider the node dead: start over.
		_ = d.dropNode(ctx, n)
		return driver.Lease{}, false, nil
	}
	if err := d.rewrite(ctx, n, req.TTL); errors.Is(err, errNodeGone) {
		return driver.Lease{}, false, nil
	} else if err != nil {
		return driver.Lease{}, true, callFailed(ctx, op, req.Key, err)
	}
	if granted {
		return d.grant(n, false), true, nil
	}
	if wait {
		return driver.Lease{}, false, nil // the caller waits with n
	}
	// A queue place or a found node: granted only if first.
	l, err := d.settle(ctx, op, n, req)
	return l, true, err
}

// findLost finds n's node, whose create's reply was lost, by its owner's
// name, and deletes the owner's other nodes there (a retry's). It returns
// its path, or "" (n forgotten) when there is none.
func (d *Driver) findLost(ctx context.Context, op string, n *node, req driver.Request) (string, error) {
	q, err := d.list(ctx, n.parent)
	if errors.Is(err, zk.ErrNoNode) {
		d.forget(n)
		return "", nil
	}
	if err != nil {
		return "", callFailed(ctx, op, req.Key, err)
	}
	var mine []child
	for _, c := range q {
		if c.owner == req.Owner {
			mine = append(mine, c)
		}
	}
	if len(mine) == 0 {
		d.forget(n)
		return "", nil
	}
	for _, c := range mine[1:] {
		_ = d.del(ctx, n.parent+"/"+c.name, -1)
	}
	path := n.parent + "/" + mine[0].name
	d.mu.Lock()
	n.path, n.czxid = path, 0 // rewrite learns its czxid
	d.mu.Unlock()
	return path, nil
}
