package locker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-locker/locker/driver"
)

// WithMinHold makes every hold keep its key for at least d after it was
// acquired, even when it is released sooner: a Release or Unlock before
// then ends the hold for the caller at once (Done closes, the handle is
// unlocked, Release returns nil), but the lease stays on the backend, not
// renewed, until d after the acquiring request was sent, and is released
// then in the background. Client.Close does not shorten it, and waits for
// it: the holds it ends are kept the same way, and Close returns when
// every lease kept for a minimum hold has been released at its end (or
// its context is done), so that a process that stops gracefully, right
// after a hold, keeps the key for the remainder of the minimum hold, not
// for the TTL. A process that exits without Close leaves the lease to
// expire by its TTL. (The driver's backend client must stay open until
// Close returns for the releases to be sent; a failed one is left to the
// TTL.)
//
// It is ShedLock's lockAtLeastFor, for work that must run once per
// scheduled time across replicas whose clocks disagree a little: a replica
// whose clock is late reaches the same tick after the first has finished,
// and must find the key still held. d must exceed the largest clock offset
// between replicas plus their scheduling jitter, and, when one key serves
// every tick of a job, be shorter than the interval between ticks minus
// the same allowance, so that the next tick finds the key free; half the
// interval is a good choice. Keying each run by its scheduled time
// (cron/<job>/<tick in unix seconds>) removes the upper bound.
//
// d must be positive and no longer than the TTL minus the safety margin
// (a tenth of the TTL, at least 20ms), so that the lease granted lasts
// until then on its own: ErrInvalidOption otherwise, reported by the
// first lock call. A hold that is lost is not kept. The minimum hold
// counts from when the grant was received, the latest moment it can have
// been made, so it lasts at least d on the backend whatever the request's
// latency.
func WithMinHold(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.badOption = fmt.Errorf("%w: min hold %v is not positive", ErrInvalidOption, d)
		}
		c.minHold = d
	}
}

// validateMinHold checks WithMinHold against the TTL.
func (c *config) validateMinHold() error {
	if c.minHold > 0 && c.minHold > c.ttl-margin(c.ttl) {
		return fmt.Errorf("%w: min hold %v is longer than TTL %v minus the safety margin %v", ErrInvalidOption, c.minHold, c.ttl, margin(c.ttl))
	}
	return nil
}

// keepUntil reports until when a release of h now must leave its lease on
// the backend: the end of its minimum hold, counted from when the grant
// was received (the latest moment it can have been made), or the zero
// time when the release may go ahead.
func (h *Hold) keepUntil() time.Time {
	if h.cfg.minHold <= 0 {
		return time.Time{}
	}
	until := h.received.Add(h.cfg.minHold)
	if !time.Now().Before(until) {
		return time.Time{}
	}
	return until
}

// keepLease makes sure that the lease of h, which the watchdog has let
// go, lasts until the end of its minimum hold, and returns that end. It
// reports false when there is nothing to keep: no minimum hold left, or
// the lease is gone; the caller then releases h as usual. The lease lasts
// until h's local deadline at least; when the hold must last longer (an
// acquire that took long, a driver that counts the grant from before its
// request), one Refresh extends it. If that Refresh fails otherwise than
// with ErrNotHeld, the lease is kept for as long as it lasts, and the
// error reported.
func (h *Hold) keepLease(ctx context.Context, op string) (time.Time, bool) {
	until := h.keepUntil()
	if until.IsZero() {
		return until, false
	}
	w := &h.c.wd
	w.mu.Lock()
	deadline := h.deadline
	w.mu.Unlock()
	if until.Before(deadline) {
		return until, true
	}
	err := ctx.Err()
	if err == nil {
		rctx, cancel := cleanupContext(ctx, h.ttl) // bounded, like a release
		_, err = h.c.drv.Refresh(rctx, h.lease)    // TTL from now: past until (validateMinHold)
		cancel()
	}
	switch {
	case errors.Is(err, driver.ErrNotHeld):
		return time.Time{}, false
	case err != nil:
		h.c.reportError(h.cfg, opError(op, h.lease.Key, fmt.Errorf("extending the lease to the end of its minimum hold: %w", err)))
	}
	return until, true
}

// releaseAt releases l at until, in the background, for a hold whose
// minimum hold lasts until then. Client.Close waits for it; if the process
// ends first, the lease expires on the backend by its TTL, later than
// until.
func (c *Client) releaseAt(l driver.Lease, ttl time.Duration, until time.Time, cfg *config) {
	c.mu.Lock()
	c.kept++
	c.mu.Unlock()
	time.AfterFunc(time.Until(until), func() {
		defer c.keptReleased()
		ctx, cancel := context.WithTimeout(context.Background(), cleanupBound(ttl))
		defer cancel()
		if err := c.cleanUp(ctx, l); err != nil && !errors.Is(err, driver.ErrNotHeld) && !driver.IsPermanent(err) {
			c.reportError(cfg, opError("release", l.Key, fmt.Errorf("after the minimum hold: %w", err)))
		}
	})
}

// keptReleased counts a lease of releaseAt as released.
func (c *Client) keptReleased() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.kept--
	if c.kept == 0 && c.keptDone != nil {
		close(c.keptDone)
		c.keptDone = nil
	}
}

// keptIdle returns a channel closed when no lease kept by releaseAt is
// left, for Close.
func (c *Client) keptIdle() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keptDone == nil {
		c.keptDone = make(chan struct{})
		if c.kept == 0 {
			close(c.keptDone)
			ch := c.keptDone
			c.keptDone = nil
			return ch
		}
	}
	return c.keptDone
}
