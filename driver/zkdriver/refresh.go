package zkdriver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
	"github.com/go-zookeeper/zk"
)

// Refresh implements driver.Driver: it rewrites the node (one round trip).
// It fails with driver.ErrNotHeld when the node is gone, of an ended
// session, or past its lease by this client's clock (then deleted).
func (d *Driver) Refresh(ctx context.Context, l driver.Lease) (driver.Lease, error) {
	out, err := d.refresh(ctx, l)
	return d.finalLease(ctx, out, err)
}

func (d *Driver) refresh(ctx context.Context, l driver.Lease) (driver.Lease, error) {
	const op = "refresh"
	if err := d.begin(ctx, op, l.Key); err != nil {
		return driver.Lease{}, err
	}
	n, err := d.lookup(ctx, op, l)
	if err != nil {
		return driver.Lease{}, err
	}
	ttl := l.TTL // as granted (driver.Driver)
	if err := d.rewrite(ctx, n, ttl); errors.Is(err, errNodeGone) {
		return driver.Lease{}, errorf(op, l.Key, fmt.Errorf("%w: %w", driver.ErrNotHeld, err))
	} else if err != nil {
		return driver.Lease{}, callFailed(ctx, op, l.Key, err)
	}
	d.mu.Lock()
	out := n.lease(ttl)
	d.mu.Unlock()
	return out, nil
}

// lookup returns the driver's node for l if it is a live hold: granted,
// in l.Mode, with token l.Token (unless 0), of the current session, within
// its lease by this client's clock (else deleted). Otherwise it returns an
// error wrapping driver.ErrNotHeld (another Driver's lease is left held).
func (d *Driver) lookup(ctx context.Context, op string, l driver.Lease) (*node, error) {
	d.mu.Lock()
	n := d.nodes[nodeKey{l.Key, l.Owner}]
	why := n.mismatch(l)
	if n == nil {
		d.mu.Unlock()
		return nil, errorf(op, l.Key, fmt.Errorf("%w: %w", driver.ErrNotHeld, why))
	}
	stale := time.Since(n.written) >= n.ttl
	lost, session := n.lost, n.session
	d.mu.Unlock()
	if why == nil && !live(d.state(session)) {
		why, lost = errSessionEnded, errSessionEnded
	}
	switch {
	case why == nil && stale:
		_ = d.dropNode(ctx, n)
		return nil, errorf(op, l.Key, fmt.Errorf("%w: the lease ran out", driver.ErrNotHeld))
	case why == nil:
		return n, nil
	}
	if lost != nil {
		d.forget(n)
	}
	return nil, errorf(op, l.Key, fmt.Errorf("%w: %w", driver.ErrNotHeld, why))
}

// mismatch says why n, the driver's node of l's owner (or nil), is not
// the live hold l, or returns nil; d.mu is held.
func (n *node) mismatch(l driver.Lease) error {
	switch {
	case n == nil:
		return errors.New("no hold of this driver")
	case !n.granted:
		return errors.New("queued, not granted")
	case n.mode != l.Mode:
		return fmt.Errorf("held in %v mode", n.mode)
	case !l.Abandoned && uint64(n.czxid) != l.Token:
		return fmt.Errorf("held with token %d", n.czxid)
	}
	return n.lost
}

// maxMulti bounds the operations of one multi request.
const maxMulti = 500

// RefreshBatch implements driver.BatchRefresher: one multi request per 500
// leases. When a node is gone the multi fails as a whole: that lease gets
// driver.ErrNotHeld and the others are sent again without it.
func (d *Driver) RefreshBatch(ctx context.Context, ls []driver.Lease) []error {
	errs := d.refreshBatch(ctx, ls)
	for i, err := range errs {
		errs[i] = d.final(ctx, err)
	}
	return errs
}

func (d *Driver) refreshBatch(ctx context.Context, ls []driver.Lease) []error {
	const op = "refresh"
	errs := make([]error, len(ls))
	if err := d.begin(ctx, op, ""); err != nil {
		for i, l := range ls {
			errs[i] = d.begin(ctx, op, l.Key)
		}
		return errs
	}
	var items []batchItem
	for i, l := range ls {
		n, err := d.lookup(ctx, op, l)
		if err != nil {
			errs[i] = err
			continue
		}
		d.mu.Lock()
		items = append(items, batchItem{i, n, n.path, l.TTL})
		d.mu.Unlock()
	}
	for lo, hi := range driverkit.Chunks(len(items), maxMulti, nil) {
		for chunk := items[lo:hi]; len(chunk) > 0; {
			chunk = d.refreshMulti(ctx, ls, errs, chunk)
		}
	}
	return errs
}

// A batchItem is a lease of a RefreshBatch to rewrite: ls[i], whose node
// is n at path, with its new TTL.
type batchItem struct {
	i    int
	n    *node
	path string
	ttl  time.Duration
}

// refreshMulti rewrites chunk's items in one multi and sets their errors;
// when a node is gone it sets that item's error and returns the others, to
// send again, and otherwise nil.
func (d *Driver) refreshMulti(ctx context.Context, ls []driver.Lease, errs []error, chunk []batchItem) []batchItem {
	const op = "refresh"
	ops := make([]any, len(chunk))
	for j, it := range chunk {
		ops[j] = &zk.SetDataRequest{Path: it.path, Data: encodeData(it.ttl, it.n.value), Version: -1}
	}
	sent := time.Now()
	res, err := d.multi(ctx, ops...)
	session := d.conn.SessionID()
	if err != nil && len(res) == len(chunk) {
		failed := slices.IndexFunc(res, func(r zk.MultiResponse) bool { return r.Error != nil })
		if failed >= 0 && errors.Is(res[failed].Error, zk.ErrNoNode) {
			it := chunk[failed]
			d.forget(it.n)
			errs[it.i] = errorf(op, ls[it.i].Key, fmt.Errorf("%w: %w", driver.ErrNotHeld, errNodeGone))
			return append(chunk[:failed:failed], chunk[failed+1:]...)
		}
	}
	if err != nil {
		for _, it := range chunk {
			errs[it.i] = callFailed(ctx, op, ls[it.i].Key, err)
		}
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for j, it := range chunk {
		st := res[j].Stat
		if st == nil || st.Czxid != it.n.czxid || st.EphemeralOwner != it.n.session || st.EphemeralOwner != session {
			errs[it.i] = errorf(op, ls[it.i].Key, fmt.Errorf("%w: %w", driver.ErrNotHeld, errNodeGone))
			continue
		}
		it.n.written, it.n.ttl = sent, it.ttl
	}
	return nil
}
