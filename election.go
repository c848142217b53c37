package locker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-locker/locker/driver"
)

// An Election elects one leader among the processes that campaign on its
// key, as etcd's concurrency.Election and Curator's LeaderLatch do, with a
// fencing token: the term.
//
// Leadership is a Hold on the key in exclusive mode, renewed by the
// Client's watchdog, whose token is the term: strictly greater than the
// term of every earlier leader of the election, so that what a leader
// writes can be fenced with it (see Guard). A leader whose lease cannot be
// renewed learns it from Hold.Done before its lease runs out on the
// backend, so before a successor can be elected.
//
// The leader's value, given to Campaign, is published with the grant:
// Leader and Observe read it. An Election needs a driver whose
// Capabilities report Values and Inspect; otherwise its calls return an
// error wrapping errors.ErrUnsupported.
//
// Campaign and Resign follow Mutex's Acquire and UnlockContext: a second
// Campaign on the same Election waits until the first leadership is
// resigned, also after it was lost (Resign then reports the loss); a
// Campaign on another Election of the key campaigns at once. An Election
// has only these forms: leadership carries a value and is used through its
// Hold (the term, Done, Context), which a sync-style Lock could not
// return, and a process campaigns to lead until it is elected, not to
// try once. An Election is safe for concurrent use.
//
// Make an Election with Client.Election: the zero Election fails with an
// error wrapping ErrZeroValue.
type Election struct {
	handle
}

// Key returns the election's key.
func (e *Election) Key() string { return e.key }

// Done returns a channel that is closed when this Election's leadership
// ends, or is closed already when it does not lead.
func (e *Election) Done() <-chan struct{} { return e.doneChan() }

// Leader is the state of an election: the leader's value and term.
type Leader struct {
	// Value is what the leader passed to Campaign.
	Value string
	// Term is the leader's fencing token.
	Term Token
}

// Election returns an Election for key. It does no I/O: a bad key or
// option is reported by the first call.
func (c *Client) Election(key string, opts ...Option) *Election {
	e := &Election{}
	e.init(c.orZero(), key, opts)
	return e
}

// Campaign waits until this process is elected and returns its leadership:
// its Token is the term. value is published for Leader and Observe; it may
// be empty and is at most driver.MaxValueLen bytes (ErrInvalidValue). If
// ctx ends first, Campaign returns its error and is not a candidate any
// more.
func (e *Election) Campaign(ctx context.Context, value string) (*Hold, error) {
	const op = "campaign"
	if err := e.check(op); err != nil {
		return nil, err
	}
	if len(value) > driver.MaxValueLen {
		return nil, opError(op, e.key, fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidValue, len(value), driver.MaxValueLen))
	}
	return e.lockOp(ctx, kindElection, lockOp{op: op, mode: driver.Exclusive, value: value})
}

// Resign gives up the leadership that Campaign returned, as
// Hold.Release does; the election's next leader gets a greater term. It
// returns an error wrapping ErrNotHeld when this Election does not lead,
// and wrapping ErrLost when the leadership was lost before.
func (e *Election) Resign(ctx context.Context) error {
	return e.unlockContext(ctx, driver.Exclusive, "resign")
}

// Leader returns the election's current leader, as the backend sees it, or
// an error wrapping ErrNoLeader when there is none.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	const op = "leader"
	if ctx == nil {
		return Leader{}, opError(op, e.key, ErrNilContext)
	}
	if err := e.check(op); err != nil {
		return Leader{}, err
	}
	l, ok, err := e.read(ctx)
	if err != nil {
		return Leader{}, opError(op, e.key, err)
	}
	if !ok {
		return Leader{}, opError(op, e.key, ErrNoLeader)
	}
	return l, nil
}

// read returns the current leader, if any.
func (e *Election) read(ctx context.Context) (Leader, bool, error) {
	st, err := e.c.inspect.Inspect(ctx, e.key)
	if err != nil {
		return Leader{}, false, err
	}
	if len(st.Holders) == 0 || st.Mode != driver.Exclusive {
		return Leader{}, false, nil
	}
	h := st.Holders[0]
	return Leader{Value: h.Value, Term: Token(h.Token)}, true, nil
}

// Observe returns a channel that receives the election's leader each time
// it changes, starting with the current one, and the zero Leader while
// there is none. It is closed when ctx ends or the Client is closed. A
// reader that falls behind misses intermediate leaders, never the latest:
// the channel has no buffer and Observe sends only the state it last read.
//
// Observe reads the backend after each release the driver announces
// (driver.Notifier) and otherwise at the Client's backoff delays
// (WithBackoff): at the shortest delay after a change, doubling up to the
// longest while nothing changes. Errors reading it go to the error
// handler and are retried.
func (e *Election) Observe(ctx context.Context) (<-chan Leader, error) {
	const op = "observe"
	if ctx == nil {
		return nil, opError(op, e.key, ErrNilContext)
	}
	if err := e.check(op); err != nil {
		return nil, err
	}
	ch := make(chan Leader)
	if !e.c.goBackground(func() {
		defer close(ch)
		e.observe(ctx, ch)
	}) {
		return nil, opError(op, e.key, ErrClosed)
	}
	return ch, nil
}

// observe runs Observe's loop until ctx ends or the Client closes.
func (e *Election) observe(ctx context.Context, ch chan<- Leader) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(e.c.ctx, cancel)
	defer stop()

	var notified <-chan struct{}
	if e.c.notifier != nil {
		if sub, err := e.c.notifier.Subscribe(ctx, e.key); err == nil {
			defer sub.Close()
			notified = sub.C()
		} else if ctx.Err() == nil {
			e.reportError(opError("observe", e.key, fmt.Errorf("subscribe: %w", err)))
		}
	}
	delay := e.cfg.minBackoff
	timer := time.NewTimer(0)
	defer timer.Stop()
	var last Leader
	first := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-notified:
			delay = e.cfg.minBackoff
		case <-timer.C:
		}
		l, _, err := e.read(ctx)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			e.reportError(opError("observe", e.key, err))
		case first || l != last:
			select {
			case ch <- l:
			case <-ctx.Done():
				return
			}
			first, last, delay = false, l, e.cfg.minBackoff
		default:
			delay = min(2*delay, e.cfg.maxBackoff)
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(delay)
	}
}

// check reports, as an error of op, what keeps the election from working
// with its driver.
func (e *Election) check(op string) error {
	c := e.c
	if err := zeroCheck(op, kindElection, c); err != nil {
		return err
	}
	switch {
	case c.drv == nil:
		return opError(op, e.key, ErrNilDriver)
	case !c.values || c.inspect == nil:
		return opError(op, e.key, fmt.Errorf("elections need a driver whose Capabilities report Values and Inspect: driver %T: %w", c.drv, errors.ErrUnsupported))
	}
	return nil
}
