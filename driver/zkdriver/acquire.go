package zkdriver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-zookeeper/zk"
)

// Acquire implements driver.Acquirer: it creates the owner's lock node at
// the end of the key's queue and waits until nothing before it blocks it,
// watching only the node it waits for (Curator's recipe, no herd): an
// exclusive node waits for the node just before it, a shared one for the
// closest exclusive node before it. When that node is deleted and it was
// the only one blocking, the wait ends without another round trip.
//
// While it waits Acquire rewrites its own node every third of the TTL, so
// that the node behind it does not take it for dead, and it deletes the
// node it waits for if that node's lease expires (no rewrite for its TTL,
// by this client's clock). It fails when its own session ends, when its
// node disappears, and when ctx is done; then it deletes its node (on a
// fresh context if ctx is done) and leaves nothing queued.
func (d *Driver) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	const op = "acquire"
	if err := d.begin(ctx, op, req.Key); err != nil {
		return driver.Lease{}, err
	}
	if err := d.checkRequest(op, req); err != nil {
		return driver.Lease{}, err
	}
	parent := d.parentPath(req.Key)
	nk := nodeKey{req.Key, req.Owner}
	var n *node
	d.mu.Lock()
	prev := d.nodes[nk]
	d.mu.Unlock()
	if prev != nil {
		l, done, err := d.resume(ctx, op, prev, req, true)
		if done {
			return l, err
		}
		d.mu.Lock()
		if d.nodes[nk] == prev && prev.path != "" {
			n = prev // the owner's place in the queue, found again
		}
		d.mu.Unlock()
	}
	if n == nil {
		var numChildren int32
		var err error
		n, numChildren, err = d.create(ctx, op, req, parent)
		if err != nil {
			return driver.Lease{}, err
		}
		if numChildren == 1 {
			return d.grant(n, true), nil
		}
	}
	d.markHot(req.Key)
	l, err := d.wait(ctx, n, req)
	if err != nil {
		_ = d.dropNode(ctx, n)
		if ctx.Err() != nil {
			return driver.Lease{}, errorf(op, req.Key, ctx.Err())
		}
		return driver.Lease{}, fail(op, req.Key, err)
	}
	return l, nil
}

// wait waits until n is granted; see Acquire.
func (d *Driver) wait(ctx context.Context, n *node, req driver.Request) (driver.Lease, error) {
	d.mu.Lock()
	parent, path, ttl, written, session := n.parent, n.path, n.ttl, n.written, n.session
	d.mu.Unlock()
	st := d.sess.state(session)
	if st == nil || st.over() {
		return driver.Lease{}, errSessionEnded
	}
	name := path[len(parent)+1:]

	keepAlive := time.NewTimer(max(time.Until(written.Add(ttl/3)), 0))
	defer keepAlive.Stop()
	expiry := time.NewTimer(time.Hour)
	expiry.Stop()
	defer expiry.Stop()
	retry := &retrier{}

	// pause waits after a transient error; it returns an error when the
	// wait must end.
	var failingSince time.Time
	pause := func(cause error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if st.over() {
			return fmt.Errorf("%w: %w", errSessionEnded, st.err)
		}
		if isPermanent(cause) || errors.Is(cause, zk.ErrClosing) {
			return cause
		}
		d.mu.Lock()
		closed := d.closed
		d.mu.Unlock()
		if closed {
			return ErrClosed
		}
		if failingSince.IsZero() {
			failingSince = time.Now()
		} else if time.Since(failingSince) > st.timeout {
			// Nothing got through for a whole session timeout: the
			// session, and our node with it, cannot be alive.
			return fmt.Errorf("zkdriver: no answer from ZooKeeper for longer than the session timeout %v: %w", st.timeout, cause)
		}
		t := time.NewTimer(retry.next())
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-st.expired:
			return fmt.Errorf("%w: %w", errSessionEnded, st.err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// keep rewrites n's node; it returns an error when the node is gone.
	keep := func() error {
		sent := time.Now()
		st, err := d.write(ctx, path, ttl)
		switch {
		case err == nil:
			d.mu.Lock()
			n.written, n.mzxid = sent, st.Mzxid
			d.mu.Unlock()
			keepAlive.Reset(ttl / 3)
		case errors.Is(err, zk.ErrNoNode), errors.Is(err, errNotOurs):
			return errNodeGone
		case ctx.Err() != nil:
			return ctx.Err()
		default:
			keepAlive.Reset(min(ttl/10, time.Second))
		}
		return nil
	}

	for {
		names, err := call(ctx, func() ([]string, error) {
			names, _, err := d.conn.Children(parent)
			return names, err
		}, nil)
		if err != nil {
			if errors.Is(err, zk.ErrNoNode) {
				return driver.Lease{}, errNodeGone
			}
			if err := pause(err); err != nil {
				return driver.Lease{}, err
			}
			continue
		}
		retry.reset()
		failingSince = time.Time{}
		q := parseQueue(names)
		i := q.index(name)
		if i < 0 {
			return driver.Lease{}, errNodeGone
		}
		b := q.blockers(i, req.Mode)
		if len(b) == 0 {
			return d.grant(n, true), nil
		}
		pred := parent + "/" + b[len(b)-1].name
		only := len(b) == 1

		var seenZxid int64
		var seenAt time.Time
	watch:
		for {
			got, err := call(ctx, func() (watchResult, error) {
				data, stat, ch, err := d.conn.GetW(pred)
				return watchResult{data, stat, ch}, err
			}, nil)
			recv := time.Now()
			if errors.Is(err, zk.ErrNoNode) {
				if only {
					return d.grant(n, true), nil
				}
				break watch
			}
			if err != nil {
				if err := pause(err); err != nil {
					return driver.Lease{}, err
				}
				continue
			}
			retry.reset()
			failingSince = time.Time{}
			if got.st.Mzxid != seenZxid {
				// A new version: its lease runs from now at the earliest.
				seenZxid, seenAt = got.st.Mzxid, recv
			}
			expiry.Stop()
			if predTTL, ok := decodeTTL(got.data); ok {
				expiry.Reset(max(time.Until(seenAt.Add(predTTL)), 0))
			}
			version := got.st.Version
			for {
				select {
				case ev := <-got.ch:
					switch ev.Type {
					case zk.EventNodeDeleted:
						if only {
							return d.grant(n, true), nil
						}
						break watch
					case zk.EventNodeDataChanged:
						continue watch
					}
					// The watch was dropped (session expired, or the
					// connection closed): look again.
					if st.over() {
						return driver.Lease{}, fmt.Errorf("%w: %w", errSessionEnded, st.err)
					}
					if err := pause(ev.Err); err != nil {
						return driver.Lease{}, err
					}
					continue watch
				case <-expiry.C:
					// Not rewritten for its whole TTL since we saw this
					// version: its holder has declared it lost. The
					// delete names the version, so a refresh on its way
					// wins.
					_, err := call(ctx, func() (struct{}, error) { return struct{}{}, d.conn.Delete(pred, version) }, nil)
					switch {
					case err == nil, errors.Is(err, zk.ErrNoNode):
						if only {
							return d.grant(n, true), nil
						}
						break watch
					case errors.Is(err, zk.ErrBadVersion):
						continue watch
					}
					if err := pause(err); err != nil {
						return driver.Lease{}, err
					}
					continue watch
				case <-keepAlive.C:
					if err := keep(); err != nil {
						return driver.Lease{}, err
					}
				case <-st.expired:
					return driver.Lease{}, fmt.Errorf("%w: %w", errSessionEnded, st.err)
				case <-ctx.Done():
					return driver.Lease{}, ctx.Err()
				}
			}
		}
	}
}

// watchResult carries the results of a GetW through call.
type watchResult struct {
	data []byte
	st   *zk.Stat
	ch   <-chan zk.Event
}

// retrier spaces retries of transient errors: 10ms doubling to 1s.
type retrier struct{ d time.Duration }

func (r *retrier) next() time.Duration {
	if r.d == 0 {
		r.d = 10 * time.Millisecond
	} else {
		r.d = min(2*r.d, time.Second)
	}
	return r.d
}

func (r *retrier) reset() { r.d = 0 }
