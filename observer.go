package locker

import (
	"context"
	"errors"
	"time"

	"github.com/go-locker/locker/driver"
)

// An Observer receives the events of the locks of a Client (WithObserver):
// lock calls, renewals that failed, errors, and the end of every hold. It is meant
// for metrics, traces and logs; package
// github.com/go-locker/locker/otel builds one for OpenTelemetry.
//
// Each field may be nil. The functions are called synchronously, from the
// goroutine of the lock call or of the watchdog, and never with a lock of
// this package held; they must be fast and must not block (hand slow work
// to a goroutine of your own), and must be safe for concurrent use.
//
// For one hold the events come in this order: AcquireStart, the end
// function it returned (with the grant), any RenewalFailed, then exactly
// one HoldEnd, which is called before the hold's Done channel closes and
// its Context is cancelled. A hold granted while the Client closes is reported granted
// and then ended as closed at once.
type Observer struct {
	// AcquireStart is called when a lock call (Lock, Acquire, TryLock,
	// RLock… of any handle of the Client) starts asking for its key, with
	// the call's context. The function it returns, if not nil, is called
	// once when the call ends, whatever the outcome.
	AcquireStart func(ctx context.Context, ev AcquireStart) (end func(AcquireEnd))
	// RenewalFailed is called when a renewal of the watchdog failed
	// without ending the hold: the watchdog tries again until the local
	// deadline. (A renewal that ends the hold is reported by HoldEnd.)
	RenewalFailed func(RenewalFailed)
	// HoldEnd is called once when a hold ends: released, lost or closed.
	HoldEnd func(HoldEnd)
	// Error is called with every error that goes to the error handler
	// (WithErrorHandler), before the handler, whatever it is: the retries
	// of lock calls, failed renewals, backend errors of Unlock and
	// TryLock, failed background cleanups. The default handler logs only
	// some of them during an outage; Error sees them all.
	Error func(err error)
}

// WithObserver sets the Observer of the locks: given to New, it observes
// every lock of the Client. A nil o turns observation off.
func WithObserver(o *Observer) Option { return func(c *config) { c.observer = o } }

// AcquireStart describes a lock call that starts.
type AcquireStart struct {
	Op   string // "lock", "trylock", "rlock", "acquire", "campaign"…, as in Error.Op
	Key  string
	Mode driver.Mode
	Try  bool // one attempt, no waiting
}

// Outcome is how a lock call ended.
type Outcome uint8

// Outcomes of a lock call.
const (
	// OutcomeGranted: the key was granted (AcquireEnd.Token).
	OutcomeGranted Outcome = iota
	// OutcomeBusy: a try found the key held, by another owner or by
	// another lock call of the process.
	OutcomeBusy
	// OutcomeCanceled: the call's context was cancelled or its deadline
	// passed.
	OutcomeCanceled
	// OutcomeClosed: the Client was closed.
	OutcomeClosed
	// OutcomeError: any other error (a bad key or option, a backend
	// error that could not be retried).
	OutcomeError
)

// String returns the outcome's name as used in metric attributes:
// "granted", "busy", "canceled", "closed" or "error".
func (o Outcome) String() string {
	switch o {
	case OutcomeGranted:
		return "granted"
	case OutcomeBusy:
		return "busy"
	case OutcomeCanceled:
		return "canceled"
	case OutcomeClosed:
		return "closed"
	}
	return "error"
}

// AcquireEnd describes the end of a lock call.
type AcquireEnd struct {
	AcquireStart
	Outcome Outcome
	// Wait is how long the call took, from AcquireStart, including the
	// time spent behind other lock calls of the process.
	Wait time.Duration
	// Attempts counts the requests for the key sent to the backend:
	// attempts (TryAcquire) and waits in the backend's own queue.
	Attempts int
	Token    Token // the grant's fencing token (OutcomeGranted only)
	Err      error // the call's error (OutcomeCanceled, OutcomeClosed, OutcomeError)
}

// RenewalFailed describes a renewal that failed without ending its hold.
type RenewalFailed struct {
	Key   string
	Mode  driver.Mode
	Token Token
	Err   error
}

// HoldEnd describes the end of a hold.
type HoldEnd struct {
	Key   string
	Mode  driver.Mode
	Token Token
	// Held is how long the hold lasted, from the end of its lock call.
	Held time.Duration
	// Err is nil when the hold was released (Unlock, Release), and wraps
	// ErrLost (with the reason) or ErrClosed otherwise.
	Err error
}

// Lost reports whether the hold ended by loss.
func (e HoldEnd) Lost() bool { return errors.Is(e.Err, ErrLost) }

// observeAcquire reports the start of the lock call o, and returns the
// function that reports its end, or nil when nobody observes it.
func (o *lockOp) observeAcquire(ctx context.Context) func(h *Hold, err error) {
	obs := o.cfg.observer
	if obs == nil || obs.AcquireStart == nil || ctx == nil {
		return nil
	}
	start := time.Now()
	ev := AcquireStart{Op: o.op, Key: o.key, Mode: o.mode, Try: o.try}
	end := obs.AcquireStart(ctx, ev)
	if end == nil {
		return nil
	}
	return func(h *Hold, err error) {
		e := AcquireEnd{AcquireStart: ev, Wait: time.Since(start), Attempts: o.attempts, Err: err}
		switch {
		case h != nil:
			e.Outcome, e.Token = OutcomeGranted, h.Token()
		case err == nil:
			e.Outcome = OutcomeBusy
		case errors.Is(err, ErrClosed):
			e.Outcome = OutcomeClosed
		case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
			e.Outcome = OutcomeCanceled
		default:
			e.Outcome = OutcomeError
		}
		end(e)
	}
}

// observeRenewalFailed reports a failed renewal of h.
func (h *Hold) observeRenewalFailed(err error) {
	if obs := h.cfg.observer; obs != nil && obs.RenewalFailed != nil {
		obs.RenewalFailed(RenewalFailed{Key: h.lease.Key, Mode: h.lease.Mode, Token: h.Token(), Err: err})
	}
}

// observeEnd reports the end of h, with reason err (nil for a release).
func (h *Hold) observeEnd(err error) {
	if obs := h.cfg.observer; obs != nil && obs.HoldEnd != nil {
		if err != nil {
			err = opError("hold", h.lease.Key, err)
		}
		obs.HoldEnd(HoldEnd{Key: h.lease.Key, Mode: h.lease.Mode, Token: h.Token(), Held: time.Since(h.granted), Err: err})
	}
}
