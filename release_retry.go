package locker

import (
	"context"
	"errors"
	"time"

	"github.com/go-locker/locker/driver"
)

// maxReleaseCalls bounds the Release calls one release sends at once
// (see releaseHedged).
const maxReleaseCalls = 3

// hedgeDelay is how long a release waits for its Release call to answer
// before it sends another: a fifth of the TTL, within [200ms, 2s].
func hedgeDelay(ttl time.Duration) time.Duration {
	return min(max(ttl/5, 200*time.Millisecond), 2*time.Second)
}

// releaseHedged calls Release for l and, while no call has answered, sends
// another one every hedgeDelay(ttl), up to maxReleaseCalls in flight. It
// returns the first answer that settles the release (nil, ErrNotHeld, a
// permanent error) or, when every call failed otherwise, the last error.
//
// A request in flight when a replicated backend loses its leader can hang
// until the server gives up on it (an etcd proposal forwarded to the dead
// leader waits for the server's request timeout, over 5 s); a new call
// goes to the new leader. A release by its owner is safe to repeat, and
// one that lands late deletes only that owner's lease.
//
// Without a deadline of its own, ctx is bounded as cleanupContext bounds
// it. The first call runs alone, on the caller's goroutine, bounded by the
// hedge delay (for a ctx that is never done, such as Unlock's, by a
// deadline the Client's releases share, up to every/hedgeSlack later: see
// hedgeWindow): nearly every release answers well within it, and then no
// goroutine, channel or second timer is spent (the uncontended pair is the
// hot path). Only a first call that ran into the delay starts the hedged
// calls, which stay in flight together, so that a backend that is merely
// slow still answers one of them.
func (c *Client) releaseHedged(ctx context.Context, l driver.Lease, ttl time.Duration) error {
	if ctx == nil || ctx.Err() != nil {
		ctx = context.Background() // as cleanupContext
	}
	every := hedgeDelay(ttl)
	end, bounded := ctx.Deadline()
	now := time.Now()
	if !bounded {
		end = now.Add(cleanupBound(ttl)) // as cleanupContext
	}
	first, fctx, cancel := end, ctx, context.CancelFunc(nil)
	if end.Sub(now) > every {
		first = now.Add(every)
	}
	switch {
	case !bounded && ctx == context.Background() && c.dflt == nil:
		// Unlock's context.Background (no values to pass on, unlike a
		// caller's context without a deadline): the first call shares the
		// Client's hedge window, a deadline between every and
		// every+every/hedgeSlack from now, which spares the hot path a
		// context and a timer per release. (cleanupBound(ttl) exceeds
		// that.) Not on a default Client (NewMutex), which its last
		// unpin leaves to the collector: a window's timer, pending at
		// the head of the runtime's timer heap, delays the removal of
		// the stopped watchdog timer, which would keep the Client
		// alive until the window ends.
		fctx, first = c.hedgeWindow(now, every)
	case !bounded || first.Before(end):
		fctx, cancel = context.WithDeadline(ctx, first)
	}
	err := c.drv.Release(fctx, l)
	cut := first.Before(end) && fctx.Err() != nil && ctx.Err() == nil // the delay, not ctx, ended it
	if cancel != nil {
		cancel()
	}
	if !cut || settles(err) {
		return err
	}
	if !bounded {
		var rcancel context.CancelFunc
		ctx, rcancel = context.WithDeadline(ctx, end)
		defer rcancel()
	}
	return c.releaseInFlight(ctx, l, every)
}

// hedgeSlack sets how much later than the hedge delay the first call of a
// release may be cut short when it shares a hedge window: by at most
// every/hedgeSlack (see hedgeWindow).
const hedgeSlack = 16

// A hedgeContext is a deadline that the first Release calls of the
// releases of a Client started within every/hedgeSlack of each other share
// (see hedgeWindow).
type hedgeContext struct {
	ctx      context.Context
	cancel   context.CancelFunc // never called: ctx ends at its deadline
	every    time.Duration
	deadline time.Time
}

// hedgeWindow returns a context without values, ending at a deadline
// between every and every+every/hedgeSlack after now, and that deadline:
// the Client's current one when it is still in that range, else a new one,
// which the releases of the next every/hedgeSlack share (one context and
// timer per 125 ms for a TTL of 10 s, instead of one per release). A
// context ending at its deadline, and never cancelled otherwise, is what
// one made for the call would be.
func (c *Client) hedgeWindow(now time.Time, every time.Duration) (context.Context, time.Time) {
	slack := every / hedgeSlack
	if w := c.hedge.Load(); w != nil && w.every == every &&
		!now.Add(every).After(w.deadline) && !now.Add(every+slack).Before(w.deadline) {
		return w.ctx, w.deadline
	}
	w := &hedgeContext{every: every, deadline: now.Add(every + slack)}
	w.ctx, w.cancel = context.WithDeadline(context.Background(), w.deadline)
	c.hedge.Store(w)
	return w.ctx, w.deadline
}

// settles reports whether a Release's answer ends a release: it landed,
// the lease was gone, or no retry can help.
func settles(err error) bool {
	return err == nil || errors.Is(err, driver.ErrNotHeld) || driver.IsPermanent(err)
}

// releaseInFlight sends Release calls for l every every, keeping up to
// maxReleaseCalls in flight, until one settles, every call failed, or ctx
// ends.
func (c *Client) releaseInFlight(ctx context.Context, l driver.Lease, every time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := make(chan error, maxReleaseCalls)
	send := func() { go func() { res <- c.drv.Release(ctx, l) }() }
	send()
	pending := 1
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case err := <-res:
			pending--
			if pending == 0 || settles(err) {
				return err
			}
		case <-t.C:
			if pending < maxReleaseCalls && ctx.Err() == nil {
				send()
				pending++
			}
			t.Reset(every)
		}
	}
}
