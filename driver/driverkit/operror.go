package driverkit

import "github.com/go-locker/locker/driver"

// OpError records an error of a driver's operation on a key, in the style
// of *fs.PathError: its message names the driver, the operation and the
// key (quoted and cut by QuoteKey), and it wraps the cause, so that
// errors.Is and errors.As see through it (a *LockedError, ErrNotHeld,
// context.DeadlineExceeded). A driver returns one from each exported
// method, made by [Errors.Wrap], which also marks it permanent when no
// retry can cure the cause.
//
// The front-end and tools may read Op and Key with errors.As.
type OpError struct {
	// Driver names the driver's package ("redisdriver"); it prefixes the
	// message.
	Driver string
	// Op is the operation: "acquire", "refresh", "release",
	// "subscribe", "inspect", "force-release", and so on.
	Op string
	// Key is the lock's key, as the front-end passed it.
	Key string
	// Err is the cause.
	Err error
}

// Error returns "<driver>: <op> <quoted key>: <cause>".
func (e *OpError) Error() string {
	cause := "<nil>"
	if e.Err != nil {
		cause = e.Err.Error()
	}
	return e.Driver + ": " + e.Op + " " + driver.QuoteKey(e.Key) + ": " + cause
}

// Unwrap returns the cause.
func (e *OpError) Unwrap() error { return e.Err }
