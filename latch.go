package locker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-locker/locker/driver"
)

// A LeaderLatch keeps this process a candidate in an Election for the
// life of a context, as Curator's LeaderLatch does: it campaigns, holds
// the leadership while it lasts, and campaigns again after a loss, so
// that code asks IsLeader ("am I the leader now?") instead of running a
// campaign loop and selecting on Done. Election.Latch starts one.
//
// IsLeader is false from the moment a loss is detected (a renewal the
// backend refuses, a loss the backend reports) or the leadership's local
// deadline passes, before the backend can elect anyone else, and false
// before a resignation reaches the backend: two latches of one election
// never both report true, whatever their processes, unless the backend
// takes the leadership away by force (Inspector.ForceRelease), which a
// leader learns at its next renewal. What a leader does after asking can
// still outlast its leadership (a pause, a slow job): fence it with the
// term (Leadership's Token).
//
// OnElected and OnOusted add functions called at each change, in order,
// from the latch's goroutine. A LeaderLatch is safe for concurrent use.
type LeaderLatch struct {
	e       *Election
	value   string
	elected []func(*Hold)
	ousted  []func(error)

	cur  atomic.Pointer[Hold] // the leadership, or nil
	done chan struct{}        // closed when the latch has stopped

	mu      sync.Mutex
	changed chan struct{} // closed and replaced at each change
	err     error         // why the latch stopped
}

// A LatchOption configures a LeaderLatch.
type LatchOption func(*LeaderLatch)

// OnElected adds a function called with the leadership each time the
// latch is elected, after IsLeader has become true. Functions given by
// several options are called in their order. It runs in the
// latch's goroutine, which does not campaign or resign meanwhile: it
// should return soon (start the leader's work in a goroutine of its own,
// bounded by the Hold's Context).
func OnElected(f func(leadership *Hold)) LatchOption {
	return func(l *LeaderLatch) {
		if f != nil {
			l.elected = append(l.elected, f)
		}
	}
}

// OnOusted adds a function called each time the latch stops leading,
// after IsLeader has become false: with nil when it resigned because its
// context ended, and with the Hold's error (wrapping ErrLost or
// ErrClosed) when the leadership was lost or the Client closed. It runs in
// the latch's goroutine, as OnElected does.
func OnOusted(f func(err error)) LatchOption {
	return func(l *LeaderLatch) {
		if f != nil {
			l.ousted = append(l.ousted, f)
		}
	}
}

// Latch starts a LeaderLatch that campaigns on e with value (see
// Campaign) until ctx ends or the Client is closed, then resigns. It
// returns at once; an Election with a latch must not be used for other
// campaigns. Campaign errors other than the end of ctx go to the error
// handler (WithErrorHandler) and are retried after the Client's backoff
// delays (WithBackoff), except those no retry can cure (a closed backend
// client: driver.Permanent), which stop the latch (see Err).
//
// Latch returns an error for a nil ctx, a bad key, value or option, a
// driver without elections, or a closed Client.
func (e *Election) Latch(ctx context.Context, value string, opts ...LatchOption) (*LeaderLatch, error) {
	const op = "latch"
	if ctx == nil {
		return nil, opError(op, e.key, ErrNilContext)
	}
	if err := e.check(op); err != nil {
		return nil, err
	}
	if err := validateKey(e.key); err != nil {
		return nil, opError(op, e.key, err)
	}
	if err := e.cfg.validate(e.c.drv); err != nil {
		return nil, opError(op, e.key, err)
	}
	if len(value) > driver.MaxValueLen {
		return nil, opError(op, e.key, fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidValue, len(value), driver.MaxValueLen))
	}
	l := &LeaderLatch{e: e, value: value, done: make(chan struct{}), changed: make(chan struct{})}
	for _, o := range opts {
		if o != nil {
			o(l)
		}
	}
	if !e.c.goBackground(func() {
		defer close(l.done)
		l.stop(l.run(ctx))
	}) {
		return nil, opError(op, e.key, ErrClosed)
	}
	return l, nil
}

// goBackground runs f in a goroutine that Close waits for, and reports
// false, without running it, if c is closed.
func (c *Client) goBackground(f func()) bool {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	c.bg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.bg.Done()
		f()
	}()
	return true
}

// IsLeader reports whether the latch leads the election now: it has been
// elected, has not resigned, and the leadership is neither lost nor past
// its local deadline (even if the watchdog, delayed on a busy machine, has
// not yet declared the loss). It never waits for the backend.
func (l *LeaderLatch) IsLeader() bool { return l.Leadership() != nil }

// Leadership returns the Hold of the current leadership, whose Token is
// the term (for fencing, see Guard), or nil when the latch does not lead
// (see IsLeader).
func (l *LeaderLatch) Leadership() *Hold {
	if h := l.cur.Load(); h != nil && h.live() == nil && h.beforeDeadline() {
		return h
	}
	return nil
}

// beforeDeadline reports whether h's local deadline (the last confirmed
// renewal plus the TTL less the safety margin) is still ahead. The
// watchdog declares the loss at that deadline, unless its goroutine runs
// late.
func (h *Hold) beforeDeadline() bool {
	w := &h.c.wd
	w.mu.Lock()
	d := h.deadline
	w.mu.Unlock()
	return time.Now().Before(d)
}

// Await waits until the latch leads and returns its leadership. It
// returns ctx's error if ctx ends first, and the latch's error (see Err)
// if it stops first.
func (l *LeaderLatch) Await(ctx context.Context) (*Hold, error) {
	if ctx == nil {
		return nil, opError("await", l.e.key, ErrNilContext)
	}
	for {
		l.mu.Lock()
		changed := l.changed
		l.mu.Unlock()
		if h := l.Leadership(); h != nil {
			return h, nil
		}
		select {
		case <-changed:
		case <-l.done:
			return nil, l.Err()
		case <-ctx.Done():
			return nil, opError("await", l.e.key, ctx.Err())
		}
	}
}

// Done returns a channel that is closed when the latch has stopped: its
// context ended or its Client was closed (or a permanent error stopped
// it), and its leadership, if any, was resigned.
func (l *LeaderLatch) Done() <-chan struct{} { return l.done }

// Err returns nil while the latch runs, and once it has stopped an error
// saying why: wrapping its context's error, ErrClosed, or the permanent
// error that stopped it.
func (l *LeaderLatch) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// set makes h (nil: none) the current leadership and wakes Await.
func (l *LeaderLatch) set(h *Hold) {
	l.cur.Store(h)
	l.mu.Lock()
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}

// stop records why the latch stopped: err, as an *Error of the latch
// unless it is one of the campaign already.
func (l *LeaderLatch) stop(err error) {
	if le := (*Error)(nil); !errors.As(err, &le) {
		err = opError("latch", l.e.key, err)
	}
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
}

// run campaigns until ctx ends, the Client closes or a permanent error
// comes, and returns why it stopped.
func (l *LeaderLatch) run(ctx context.Context) error {
	e := l.e
	delay := e.cfg.minBackoff
	for {
		h, err := e.Campaign(ctx, l.value)
		switch {
		case ctx.Err() != nil:
			if err == nil { // elected as ctx ended: give it back
				rctx, cancel := cleanupContext(ctx, h.ttl)
				_ = e.Resign(rctx)
				cancel()
			}
			return ctx.Err()
		case isFinal(err): // closed, a permanent backend error, bad input
			return err
		case err != nil:
			e.reportError(err)
			if !l.sleep(ctx, delay) {
				return l.why(ctx)
			}
			delay = min(2*delay, e.cfg.maxBackoff)
			continue
		}
		delay = e.cfg.minBackoff
		l.set(h)
		for _, f := range l.elected {
			f(h)
		}
		select {
		case <-h.Done():
		case <-ctx.Done():
		}
		l.resign(ctx, h)
		if err := l.why(ctx); err != nil {
			return err
		}
	}
}

// resign ends the leadership h: IsLeader turns false before the
// resignation is sent, and OnOusted is called after it.
func (l *LeaderLatch) resign(ctx context.Context, h *Hold) {
	l.set(nil)
	cause := h.Err() // nil unless lost or closed
	rctx, cancel := cleanupContext(ctx, h.ttl)
	err := l.e.Resign(rctx)
	cancel()
	if err != nil && cause == nil && !errors.Is(err, ErrLost) {
		l.e.reportError(err)
	}
	if cause == nil && errors.Is(err, ErrLost) {
		cause = err // lost as it resigned
	}
	for _, f := range l.ousted {
		f(cause)
	}
}

// why returns ctx's error, ErrClosed if the Client is closed, or nil.
func (l *LeaderLatch) why(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if l.e.c.ctx.Err() != nil {
		return ErrClosed
	}
	return nil
}

// sleep waits for d, and reports false if ctx ended or the Client closed
// first.
func (l *LeaderLatch) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-l.e.c.ctx.Done():
	}
	return false
}
