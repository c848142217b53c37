package locker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-locker/locker/driver"
)

// WithMinHold makes every hold keep its key for at least d after it was
// acquired, even when it is released sooner: a Release or Unlock before
// then ends the hold for the caller at once (Done closes, the handle is
// unlocked, Release returns nil), but the lease stays on the backend, not
// renewed, until d after the acquiring request was sent, and is released
// then in the background. Client.Close does not shorten it: Close waits,
// within its context, for these releases (it returns early with ctx's
// error, and the lease then expires on the backend by its TTL).
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
// first lock call. A hold that is lost is not kept.
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
// the backend: the end of its minimum hold, or the zero time when the
// release may go ahead.
func (h *Hold) keepUntil() time.Time {
	if h.cfg.minHold <= 0 {
		return time.Time{}
	}
	until := h.granted.Add(h.cfg.minHold)
	if !time.Now().Before(until) {
		return time.Time{}
	}
	return until
}

// linger ends h as released for its caller and releases its lease on the
// backend at until. The watchdog has let go of h: the lease granted, or
// last renewed, after h.granted lasts at least a TTL, longer than until
// (validateMinHold).
func (h *Hold) linger(until time.Time) {
	c := h.c
	c.lingers.add()
	if !h.end(stateReleased, nil) {
		// Close ended h first, and releases it.
		c.lingers.done()
		return
	}
	c.releaseAt(h.lease, h.ttl, until, h.cfg.reportError)
}

// releaseAt releases l at until, in the background, for a hold whose
// minimum hold lasts until then. The caller has counted it in c.lingers.
func (c *Client) releaseAt(l driver.Lease, ttl time.Duration, until time.Time, report func(error)) {
	time.AfterFunc(time.Until(until), func() {
		defer c.lingers.done()
		ctx, cancel := context.WithTimeout(context.Background(), cleanupBound(ttl))
		defer cancel()
		if err := c.cleanUp(ctx, l); err != nil && !errors.Is(err, driver.ErrNotHeld) && !driver.IsPermanent(err) {
			report(opError("release", l.Key, fmt.Errorf("after the minimum hold: %w", err)))
		}
	})
}

// A lingerSet counts the releases of a Client that wait for the end of a
// minimum hold, so that Close can wait for them.
type lingerSet struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0; nil while nobody waits
}

func (s *lingerSet) add() {
	s.mu.Lock()
	s.n++
	s.mu.Unlock()
}

func (s *lingerSet) done() {
	s.mu.Lock()
	s.n--
	if s.n == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
	s.mu.Unlock()
}

// wait returns a channel that is closed when no release waits.
func (s *lingerSet) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	return s.idle
}
