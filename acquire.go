package locker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-locker/locker/driver"
)

// lockOp describes one lock call.
type lockOp struct {
	op   string // for errors: "lock", "rlock", "trylock", …
	key  string
	mode driver.Mode
	cfg  *config
	try  bool    // one attempt, no waiting
	hd   *handle // the handle that makes the call, or nil
}

// check validates the call before any I/O.
func (o *lockOp) check(ctx context.Context, c *Client) error {
	var err error
	switch {
	case ctx == nil:
		err = ErrNilContext
	case c.drv == nil:
		err = ErrNilDriver
	default:
		if err = validateKey(o.key); err == nil {
			err = o.cfg.validate(c.drv)
		}
	}
	if err == nil && o.mode == driver.Shared && !c.shared {
		err = fmt.Errorf("shared mode: driver %T: %w", c.drv, errors.ErrUnsupported)
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return opError(o.op, o.key, err)
	}
	return nil
}

// acquire runs a lock call to the end: it returns a hold the watchdog
// renews, or (try only) nil and no error when the key is taken, or an
// error. On error, what the call may have left on the backend is being
// removed in the background.
func (c *Client) acquire(ctx context.Context, o lockOp) (*Hold, error) {
	if err := o.check(ctx, c); err != nil {
		return nil, err
	}
	start := time.Now()
	g, adm, ok, err := c.enter(ctx, o.key, o.mode, o.try)
	if !ok {
		if err != nil {
			return nil, opError(o.op, o.key, err)
		}
		return nil, nil
	}
	h, err := o.contend(ctx, c, g, adm, start)
	if h == nil {
		c.exit(g, o.mode)
		return nil, err
	}
	h.hd = o.hd
	if o.hd != nil {
		o.hd.track(h)
	}
	if !c.wd.add(h) {
		// Close came first: the hold is over before it began.
		c.cleanupLater(g, h.lease, h.ttl, o.cfg.reportError)
		h.end(stateClosed, ErrClosed)
		if o.hd != nil {
			o.hd.untrack(h) // the caller gives back the handle's slot
		}
		return nil, opError(o.op, o.key, ErrClosed)
	}
	return h, nil
}

// contend asks the backend for the key until it is granted, the context is
// done, or a permanent error occurs. The caller holds the key's gate place,
// which it has waited for since start: time spent behind other goroutines
// of this process counts towards the fairness threshold.
func (o *lockOp) contend(ctx context.Context, c *Client, g *gate, adm admission, start time.Time) (_ *Hold, err error) {
	req := driver.Request{Key: o.key, Owner: newOwner(), Mode: o.mode, TTL: o.cfg.ttl}
	var (
		sub    driver.Subscription
		queued bool
		dirty  bool            // the backend may hold state for req.Owner
		bo     backoff.BackOff // made on first need
		timer  *time.Timer
	)
	// joinQueue reports whether the wait has lasted long enough to take a
	// place in the backend's queue.
	joinQueue := func() bool {
		return !queued && c.queuer != nil && o.cfg.fairAfter >= 0 && time.Since(start) >= o.cfg.fairAfter
	}
	if adm.sub != nil {
		// A waiter before us in this process left its subscription:
		// the key is contended, and if we have waited long enough we
		// take our place in the backend's queue at once.
		sub = adm.sub
		if !o.try && joinQueue() {
			queued, dirty = true, true
		}
	}
	defer func() {
		if sub != nil {
			c.leaveSub(g, sub)
		}
		if timer != nil {
			timer.Stop()
		}
		if err != nil && dirty {
			// An attempt may have been applied with its reply lost, or we
			// are queued: remove whatever req.Owner has on the backend,
			// in the background, so that the call returns by its
			// deadline.
			c.cleanupLater(g, driver.Lease{Key: req.Key, Owner: req.Owner, Mode: req.Mode}, o.cfg.ttl, o.cfg.reportError)
		}
	}()

	// A head that has waited behind other goroutines of this process
	// for long enough, or that waits behind a local holder (see gate),
	// waits in the backend's own queue at once (Acquire grants at once
	// if the key is free): the key is contended, and a TryAcquire would
	// likely cost a refused request.
	native := !o.try && c.acquirer != nil &&
		((o.cfg.fairAfter >= 0 && time.Since(start) >= o.cfg.fairAfter) ||
			adm.contended)
	for {
		sent := time.Now()
		var l driver.Lease
		var aerr error
		switch {
		case native:
			native = false
			aerr = driver.ErrLocked // as if refused: wait natively below
		case queued:
			l, aerr = c.queuer.TryAcquireQueued(ctx, req)
		default:
			l, aerr = c.drv.TryAcquire(ctx, req)
		}
		if aerr == nil {
			h := newHold(c, g, o.cfg, l, sent)
			if time.Now().Before(h.deadline) {
				return h, nil
			}
			// The grant took so long that the lease may already have
			// run out: never return a hold that is not valid. Retry with
			// the same owner, which extends it and keeps the token.
			dirty = true
			continue
		}
		if cerr := ctx.Err(); cerr != nil {
			dirty = true
			return nil, opError(o.op, o.key, cerr)
		}
		var wait time.Duration
		switch {
		case errors.Is(aerr, driver.ErrLocked):
			if o.try {
				return nil, nil
			}
			if c.acquirer != nil {
				h, err := o.acquireNative(ctx, c, g, req)
				if err == nil {
					return h, nil
				}
				dirty = true
				if cerr := ctx.Err(); cerr != nil {
					// As on the other paths: the caller's context ended
					// the wait, whatever the driver wrapped around it.
					return nil, opError(o.op, o.key, cerr)
				}
				if isFinal(err) {
					return nil, opError(o.op, o.key, err)
				}
				o.cfg.reportError(opError(o.op, o.key, fmt.Errorf("retrying: %w", err)))
				if bo == nil {
					bo = o.newBackoff()
				}
				wait = bo.NextBackOff()
				break
			}
			if sub == nil && c.notifier != nil {
				s, serr := c.notifier.Subscribe(ctx, o.key)
				if serr == nil {
					sub = s
					if joinQueue() {
						queued, dirty = true, true
					}
					continue // try again now: a release may have come before the subscription
				}
				o.cfg.reportError(opError(o.op, o.key, fmt.Errorf("subscribe: %w", serr)))
			}
			if joinQueue() {
				queued, dirty = true, true
				continue // join the queue now
			}
			if bo == nil {
				bo = o.newBackoff()
			}
			wait = o.waitTime(aerr, bo, sub != nil, queued)
			if c.queuer != nil && !queued && o.cfg.fairAfter >= 0 {
				// Come back to join the queue when the threshold is
				// reached: a driver may hand the key over to its queue
				// and wake only the new holder.
				wait = min(wait, max(o.cfg.fairAfter-time.Since(start), 0))
			}
		case isFinal(aerr):
			dirty = true
			return nil, opError(o.op, o.key, aerr)
		default:
			dirty = true
			if o.try {
				return nil, opError(o.op, o.key, aerr)
			}
			o.cfg.reportError(opError(o.op, o.key, fmt.Errorf("retrying: %w", aerr)))
			if bo == nil {
				bo = o.newBackoff()
			}
			wait = bo.NextBackOff()
		}

		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		var notified <-chan struct{}
		if sub != nil {
			notified = sub.C()
		}
		select {
		case <-timer.C:
		case <-notified:
			if !timer.Stop() {
				<-timer.C
			}
		case <-ctx.Done():
			dirty = dirty || queued
			return nil, opError(o.op, o.key, ctx.Err())
		case <-c.ctx.Done():
			dirty = dirty || queued
			return nil, opError(o.op, o.key, ErrClosed)
		}
	}
}

// acquireNative waits in the backend's own queue (driver.Acquirer), then,
// unless the lease says when it began (Lease.Start), confirms the grant
// with a Refresh whose send time starts the local deadline: the grant
// itself may have happened at any time during the wait.
func (o *lockOp) acquireNative(ctx context.Context, c *Client, g *gate, req driver.Request) (*Hold, error) {
	// The wait in the backend's queue ends with the Client too.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()
	l, err := c.acquirer.Acquire(ctx, req)
	if err != nil {
		if c.ctx.Err() != nil {
			return nil, ErrClosed
		}
		return nil, err
	}
	if !l.Start.IsZero() {
		// The driver knows when the lease began: no confirmation
		// needed while it is valid.
		if h := newHold(c, g, o.cfg, l, l.Start); time.Now().Before(h.deadline) {
			return h, nil
		}
		l.Start = time.Time{}
	}
	for {
		sent := time.Now()
		l2, err := c.drv.Refresh(ctx, l)
		if err == nil {
			h := newHold(c, g, o.cfg, l2, sent)
			if time.Now().Before(h.deadline) {
				return h, nil
			}
			continue
		}
		return nil, fmt.Errorf("confirming the grant: %w", err)
	}
}

// waitTime is how long to wait after a conflict before the next attempt.
// With a notification to wait for, the timer is only a safety net for a
// lost notification: it fires when the holder's lease may have run out.
// Without one, it is the next backoff delay, capped by that same time. A
// queued waiter comes back often enough to keep its queue entry alive.
func (o *lockOp) waitTime(err error, bo backoff.BackOff, notified, queued bool) time.Duration {
	var remaining time.Duration
	var le *driver.LockedError
	if errors.As(err, &le) {
		remaining = le.Remaining
	}
	var wait time.Duration
	if notified {
		wait = o.cfg.ttl
		if remaining > 0 {
			wait = remaining + time.Millisecond
		}
	} else {
		wait = bo.NextBackOff()
		if remaining > 0 && remaining+time.Millisecond < wait {
			wait = remaining + time.Millisecond
		}
	}
	if queued {
		wait = min(wait, o.cfg.ttl/3)
	}
	return max(wait, 0)
}

func (o *lockOp) newBackoff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = o.cfg.minBackoff
	b.MaxInterval = o.cfg.maxBackoff
	b.Multiplier = 2
	b.RandomizationFactor = 0.5
	b.MaxElapsedTime = 0
	b.Reset()
	return b
}
