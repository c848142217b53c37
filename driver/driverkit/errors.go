package driverkit

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-locker/locker/driver"
)

// Errors makes the errors of a driver's methods, the same way in every
// driver: each names the driver, the operation and the key in an
// [*OpError]; once the driver or the backend client under it is closed,
// each wraps [driver.ErrClosed] and is marked [driver.Permanent], as the
// contract asks. A driver sets one up when it is made and returns
// Wrap(ctx, op, key, err) from each method that fails; Begin starts each
// call. Its methods are safe for concurrent use.
type Errors struct {
	// Driver names the driver's package ("mydriver"); it starts every
	// message.
	Driver string
	// Closed, if not nil, returns nil while the driver and its client are
	// open, and otherwise why they are not (the driver's own Close, the
	// client's error for it). err is the failed call's error (nil from
	// Begin), for a driver that learns of a closed client only from its
	// errors, such as go-redis's redis.ErrClosed.
	Closed func(err error) error
	// Permanent, if not nil, reports whether err, a backend error, is one
	// that no retry of the call can cure: a malformed request, a missing
	// table. Wrap marks those driver.Permanent.
	Permanent func(err error) bool
	// Explain, if not nil, returns err, a backend error, as the driver
	// reports it: err itself, or an error that wraps it and says what to
	// do about it (create a missing table), marked driver.Permanent when
	// no retry cures it. Wrap calls it first.
	Explain func(err error) error
}

// Begin returns the error of a call that must not touch the backend: ctx
// is done, or the driver or its client is closed; nil otherwise.
func (e *Errors) Begin(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return e.Wrap(ctx, op, key, err)
	}
	if e.Closed != nil {
		if why := e.Closed(nil); why != nil {
			return e.named(op, key, Closed(ctx, why, why))
		}
	}
	return nil
}

// Wrap returns err, the error of the operation op on key in a call made
// with ctx, as the driver returns it: nil for a nil err, otherwise an
// *OpError that wraps err (as Explain returns it), marked driver.Permanent when err is, when
// Permanent reports it, or when Closed says the driver or its client is
// closed (see [Closed]). The backend's answers ([driver.ErrLocked],
// [driver.ErrNotHeld], [driver.ErrLimitMismatch]) are returned as they
// are, only named. ctx may be nil for an error that no call's context
// bounds (a loss reported later).
func (e *Errors) Wrap(ctx context.Context, op, key string, err error) error {
	if err == nil {
		return nil
	}
	if e.Explain != nil {
		err = e.Explain(err)
	}
	if !answer(err) && !driver.IsPermanent(err) {
		switch {
		case e.Permanent != nil && e.Permanent(err):
			err = driver.Permanent(err)
		case e.Closed != nil:
			err = Closed(ctx, err, e.Closed(err))
		}
	}
	return e.named(op, key, err)
}

// named wraps err in an *OpError, marked permanent when err is.
func (e *Errors) named(op, key string, err error) error {
	oe := &OpError{Driver: e.Driver, Op: op, Key: key, Err: err}
	if driver.IsPermanent(err) {
		return driver.Permanent(oe)
	}
	return oe
}

// answer reports an error that is the backend's answer, not a failure.
func answer(err error) bool {
	return errors.Is(err, driver.ErrLocked) || errors.Is(err, driver.ErrNotHeld) || errors.Is(err, driver.ErrLimitMismatch)
}

// Closed returns err, the error of a call made with ctx, marked
// [driver.Permanent] and wrapping [driver.ErrClosed] and why, when why is
// not nil: why the driver or its client is closed, which no retry cures
// (a closed client fails its requests with errors of its own, often
// transient-looking ones, or with its own context's cancellation). err is
// returned as it is when why is nil, when err is nil or permanent already,
// and when it is ctx's own error: the caller gave up first. [Errors.Wrap]
// calls it; a driver that names its errors itself may call it directly.
func Closed(ctx context.Context, err, why error) error {
	if err == nil || why == nil || driver.IsPermanent(err) || (ctx != nil && ctx.Err() != nil && errors.Is(err, ctx.Err())) {
		return err
	}
	switch {
	case errors.Is(err, driver.ErrClosed):
	case errors.Is(err, why):
		err = fmt.Errorf("%w: %w", driver.ErrClosed, err)
	case errors.Is(why, driver.ErrClosed):
		err = fmt.Errorf("%w: %w", why, err)
	default:
		err = fmt.Errorf("%w: %w: %w", driver.ErrClosed, why, err)
	}
	return driver.Permanent(err)
}
