package locker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
)

// lockOp describes one lock call.
type lockOp struct {
	op   string // for errors: "lock", "rlock", "trylock", …
	key  string
	mode driver.Mode
	// limit and weight make a Shared call counted (Semaphore); value is
	// published with the grant (Election).
	limit, weight int64
	value         string
	cfg           *config
	try           bool    // one attempt, no waiting
	hd            *handle // the handle that makes the call, or nil

	attempts int // requests sent for the key, for the Observer
	// queuedWait is set when the call was granted after it had waited
	// with a place in the backend's queue (see handle.queuedLately).
	queuedWait bool
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
	if err == nil {
		err = o.checkCapabilities(c)
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return opError(o.op, o.key, err)
	}
	return nil
}

// checkCapabilities reports an error wrapping errors.ErrUnsupported when
// the call needs an optional capability the driver lacks.
func (o *lockOp) checkCapabilities(c *Client) error {
	switch {
	case o.mode == driver.Shared && !c.shared:
		return fmt.Errorf("shared mode: driver %T: %w", c.drv, c.refusal)
	case o.limit > 0 && !c.counted:
		return fmt.Errorf("counted shared mode (driver.Capabilities.Counted): driver %T: %w", c.drv, c.refusal)
	case o.value != "" && !c.values:
		return fmt.Errorf("published values (driver.Capabilities.Values): driver %T: %w", c.drv, c.refusal)
	}
	return nil
}

// place is the place the call takes in the key's gate.
func (o *lockOp) place() place {
	return place{mode: o.mode, weight: o.weight, limit: o.limit}
}

// acquire runs a lock call to the end: it returns a hold the watchdog
// renews, or (try only) nil and no error when the key is taken, or an
// error. On error, what the call may have left on the backend is being
// removed in the background.
func (c *Client) acquire(ctx context.Context, o lockOp) (h *Hold, err error) {
	// Observer (observer.go): the call's end is reported once.
	done := o.observeAcquire(ctx)
	if done != nil {
		defer func() {
			if done != nil {
				done(h, err)
			}
		}()
	}
	if err := o.check(ctx, c); err != nil {
		return nil, err
	}
	start := time.Now()
	g, adm, ok, err := c.enter(ctx, o.key, o.place(), o.try)
	if !ok {
		if err != nil {
			return nil, opError(o.op, o.key, err)
		}
		return nil, nil
	}
	h, err = o.contend(ctx, c, g, adm, start)
	if h == nil {
		c.exit(g, o.place())
		return nil, err
	}
	h.hd = o.hd
	if o.hd != nil {
		o.hd.track(h, o.queuedWait)
	}
	if done != nil {
		done(h, nil) // granted: its end (even by Close, below) is a HoldEnd
		done = nil
	}
	if !c.wd.add(h) {
		// Close came first: the hold is over before it began.
		c.cleanupLater(g, h.lease, h.ttl, o.cfg)
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
	k := &contention{o: o, c: c, g: g, ctx: ctx, start: start,
		req: driver.Request{Key: o.key, Owner: newOwner(), Mode: o.mode, TTL: o.cfg.ttl,
			Limit: o.limit, Weight: o.weight, Value: o.value}}
	if adm.sub != nil {
		// A waiter before us in this process left its subscription:
		// the key is contended, and if we have waited long enough we
		// take our place in the backend's queue at once.
		k.sub = adm.sub
		if !o.try && k.joinQueue() {
			k.queued, k.dirty = true, true
		}
	} else if !o.try && o.hd != nil && k.queueAtOnce() {
		k.subscribeQueued()
	}
	defer func() { k.finish(err) }()

	// A head that has waited behind other goroutines of this process
	// for long enough, or that waits behind a local holder (see gate),
	// waits in the backend's own queue at once (Acquire grants at once
	// if the key is free): the key is contended, and a TryAcquire would
	// likely cost a refused request.
	var r result
	if !o.try && c.acquirer != nil && (k.waitedEnough() || adm.contended) {
		r = k.waitInBackendQueue()
	} else {
		r = k.attempt()
	}
	for !r.done {
		if !r.now {
			if err := k.sleep(r.wait); err != nil {
				return nil, err
			}
			// A call that has waited long enough asks with its place
			// in the backend's queue at once, rather than being
			// refused once more first.
			if !o.try && k.joinQueue() {
				k.queued, k.dirty = true, true
			}
		}
		r = k.attempt()
	}
	return r.h, r.err
}

// A contention is the state of one lock call while it asks the backend
// for the key: its request, and what it has set up on the way
// (a subscription, a place in the backend's queue, a backoff).
type contention struct {
	o     *lockOp
	c     *Client
	g     *gate
	ctx   context.Context
	start time.Time
	req   driver.Request

	sub    driver.Subscription
	queued bool               // req.Owner has a place in the backend's queue (Request.Queued)
	waited bool               // an attempt was refused
	dirty  bool               // the backend may hold state for req.Owner
	bo     *driverkit.Backoff // made on first need
	timer  *time.Timer
}

// A result is what a step of a contention decided: the call is over (done,
// with h or err), or the next attempt comes now or after wait.
type result struct {
	done bool
	h    *Hold
	err  error
	now  bool
	wait time.Duration
}

func over(h *Hold, err error) result        { return result{done: true, h: h, err: err} }
func again() result                         { return result{now: true} }
func after(wait time.Duration) result       { return result{wait: wait} }
func (k *contention) fail(err error) result { return over(nil, opError(k.o.op, k.o.key, err)) }

// waitedEnough reports whether the call has waited as long as the
// fairness threshold.
func (k *contention) waitedEnough() bool {
	return k.o.cfg.fairAfter >= 0 && time.Since(k.start) >= k.o.cfg.fairAfter
}

// joinQueue reports whether the wait has lasted long enough to take a
// place in the backend's queue (driver.Request.Queued).
func (k *contention) joinQueue() bool {
	return !k.queued && k.c.queue && k.waitedEnough()
}

// queueAtOnce reports whether the call should ask with a place in the
// backend's queue from its first attempt: the driver keeps a queue and
// notifies, and the handle's previous lock call had to wait in that queue
// a moment ago (handle.queuedLately), so this one, a process locking a
// contended key again, has waited for the key already and would only be
// refused once more before it joins. Without the handle's memory a call
// asks without a place first, since most keys are not contended.
func (k *contention) queueAtOnce() bool {
	c := k.c
	return c.acquirer == nil && c.notifier != nil && c.queue && k.o.cfg.fairAfter >= 0 &&
		k.o.hd.queuedLately()
}

// subscribeQueued subscribes to the key and, when that worked, makes the
// call's attempts queued ones from the first: subscribed before its
// first attempt, the call misses no release, so a refusal needs no
// attempt again. If the subscription fails the call goes the usual way.
func (k *contention) subscribeQueued() {
	s, err := k.c.notifier.Subscribe(k.ctx, k.o.key)
	if err != nil {
		return
	}
	k.sub = s
	k.queued, k.dirty = true, true
}

// attempt makes one request for the key and decides what follows.
func (k *contention) attempt() result {
	k.o.attempts++
	sent := time.Now()
	req := k.req
	req.Queued = k.queued
	l, err := k.c.drv.TryAcquire(k.ctx, req)
	if err == nil {
		return k.granted(l, sent)
	}
	if cerr := k.ctx.Err(); cerr != nil {
		k.dirty = true
		return k.fail(cerr)
	}
	switch {
	case errors.Is(err, driver.ErrLocked):
		return k.refused(err)
	case isFinal(err):
		k.dirty = true
		return k.fail(err)
	}
	k.dirty = true // the request may have been applied
	if k.o.try {
		return k.fail(err)
	}
	return k.retry(err)
}

// granted turns a grant sent at sent into the call's hold. A grant that
// took so long that the lease may already have run out is never returned:
// the next attempt, by the same owner, extends it and keeps the token.
func (k *contention) granted(l driver.Lease, sent time.Time) result {
	k.c.errs.answered()
	h := newHold(k.c, k.g, k.o, l, sent)
	if h.received.Before(h.deadline) { // received: now, read by newHold
		k.o.queuedWait = k.queued && k.waited
		return over(h, nil)
	}
	k.dirty = true
	return again()
}

// retry reports a transient error and backs off.
func (k *contention) retry(err error) result {
	k.c.reportError(k.o.cfg, opError(k.o.op, k.o.key, fmt.Errorf("retrying: %w", err)))
	return after(k.backoff().Next())
}

func (k *contention) backoff() *driverkit.Backoff {
	if k.bo == nil {
		k.bo = k.o.newBackoff()
	}
	return k.bo
}

// refused decides how to wait for a key that another owner holds: in the
// backend's own queue (driver.Acquirer), or for a notification
// (driver.Notifier) and with a place in the backend's queue once the call
// has waited long enough (driver.Request.Queued), or by polling.
func (k *contention) refused(err error) result {
	c := k.c
	c.errs.answered()
	k.waited = true
	switch {
	case k.o.try:
		return over(nil, nil)
	case c.acquirer != nil:
		return k.waitInBackendQueue()
	case k.sub == nil && c.notifier != nil:
		s, serr := c.notifier.Subscribe(k.ctx, k.o.key)
		if serr == nil {
			k.sub = s
			if k.joinQueue() {
				k.queued, k.dirty = true, true
			}
			// A release may have come before the subscription: attempt
			// again before waiting for a notification. When the call
			// joins the backend's queue within catchUp, that queued
			// attempt is the one: the refusal costs no extra request.
			if c.queue && !k.queued && k.o.cfg.fairAfter >= 0 {
				if left := k.o.cfg.fairAfter - time.Since(k.start); left <= catchUp {
					return after(max(left, 0))
				}
			}
			return again()
		}
		if k.ctx.Err() == nil { // else the call is over: nothing to report
			k.c.reportError(k.o.cfg, opError(k.o.op, k.o.key, fmt.Errorf("subscribe: %w", serr)))
		}
	}
	if k.joinQueue() {
		k.queued, k.dirty = true, true
		return again()
	}
	wait := k.o.waitTime(err, k.backoff(), k.sub != nil, k.queued)
	if k.sub == nil && !k.queued && time.Since(k.start) >= 2*k.o.cfg.maxBackoff {
		// Polling, and waiting long: see starvingPoll.
		wait = min(wait, k.o.cfg.maxBackoff/starvingPoll)
	}
	if c.queue && !k.queued && k.o.cfg.fairAfter >= 0 {
		// Come back to join the queue when the threshold is reached: a
		// driver may hand the key over to its queue and wake only the
		// new holder.
		wait = min(wait, max(k.o.cfg.fairAfter-time.Since(k.start), 0))
	}
	return after(wait)
}

// waitInBackendQueue waits in the backend's own queue (Acquirer).
func (k *contention) waitInBackendQueue() result {
	k.o.attempts++
	h, err := k.o.acquireQueued(k.ctx, k.c, k.g, k.req)
	if err == nil {
		k.c.errs.answered()
		return over(h, nil)
	}
	k.dirty = true
	switch cerr := k.ctx.Err(); {
	case cerr != nil:
		// The caller's context ended the wait, whatever the driver
		// wrapped around it.
		return k.fail(cerr)
	case isFinal(err):
		return k.fail(err)
	}
	return k.retry(err)
}

// sleep waits for wait, a notification, ctx or the Client's close.
func (k *contention) sleep(wait time.Duration) error {
	if k.timer == nil {
		k.timer = time.NewTimer(wait)
	} else {
		k.timer.Reset(wait)
	}
	var notified <-chan struct{}
	if k.sub != nil {
		notified = k.sub.C()
	}
	select {
	case <-k.timer.C:
		return nil
	case <-notified:
		if !k.timer.Stop() {
			<-k.timer.C
		}
		return nil
	case <-k.ctx.Done():
		k.dirty = k.dirty || k.queued
		return opError(k.o.op, k.o.key, k.ctx.Err())
	case <-k.c.ctx.Done():
		k.dirty = k.dirty || k.queued
		return opError(k.o.op, k.o.key, ErrClosed)
	}
}

// finish gives back what the contention set up: the subscription to the
// next waiter of the line, and, when the call failed with the backend
// possibly holding state for its owner (an attempt applied with its reply
// lost, a queue entry), a cleanup in the background, so that the call
// returns by its deadline.
func (k *contention) finish(err error) {
	if k.sub != nil {
		k.c.leaveSub(k.g, k.sub)
	}
	if k.timer != nil {
		k.timer.Stop()
	}
	if err != nil && k.dirty {
		k.c.cleanupLater(k.g, driver.Lease{Key: k.req.Key, Owner: k.req.Owner, Mode: k.req.Mode, Abandoned: true}, k.o.cfg.ttl, k.o.cfg)
	}
}

// acquireQueued waits in the backend's own queue (driver.Acquirer), then,
// unless the lease says when it began (Lease.Start), confirms the grant
// with a Refresh whose send time starts the local deadline: the grant
// itself may have happened at any time during the wait.
func (o *lockOp) acquireQueued(ctx context.Context, c *Client, g *gate, req driver.Request) (*Hold, error) {
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
		if h := newHold(c, g, o, l, l.Start); time.Now().Before(h.deadline) {
			return h, nil
		}
		l.Start = time.Time{}
	}
	for {
		sent := time.Now()
		l2, err := c.drv.Refresh(ctx, l)
		if err == nil {
			h := newHold(c, g, o, l2, sent)
			if time.Now().Before(h.deadline) {
				return h, nil
			}
			continue
		}
		return nil, fmt.Errorf("confirming the grant: %w", err)
	}
}

// catchUp is the longest a waiter that has just subscribed may take to
// attempt again (see contention.refused): a release that came between its
// refused attempt and its subscription goes unseen for at most this long.
const catchUp = time.Millisecond

// starvingPoll divides the longest backoff into the delay between the
// attempts of a waiter that polls (its backend neither notifies nor
// queues it) and has waited twice the longest backoff: 10ms by default.
// Without a queue, a key that is contended is free only in the moment
// between a release and its holder's next lock call, and a waiter's
// attempt finds it free only when it falls into that moment; a process
// that releases and locks again at once would otherwise keep the key from
// waiters polling every 250ms for seconds.
const starvingPoll = 25

// waitTime is how long to wait after a conflict before the next attempt.
// With a notification to wait for, the timer is only a safety net for a
// lost notification: it fires when the holder's lease may have run out.
// Without one, it is the next backoff delay, capped by that same time. A
// queued waiter comes back often enough to keep its queue entry alive.
func (o *lockOp) waitTime(err error, bo *driverkit.Backoff, notified, queued bool) time.Duration {
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
		wait = bo.Next()
		if remaining > 0 && remaining+time.Millisecond < wait {
			wait = remaining + time.Millisecond
		}
	}
	if queued {
		wait = min(wait, o.cfg.ttl/3)
	}
	return max(wait, 0)
}

func (o *lockOp) newBackoff() *driverkit.Backoff {
	return &driverkit.Backoff{Min: o.cfg.minBackoff, Max: o.cfg.maxBackoff, Jitter: 0.5}
}
