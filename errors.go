package locker

import (
	"errors"
	"strconv"

	"github.com/go-locker/locker/driver"
)

// Errors reported by this package. Every error returned by a lock method is
// an *Error naming the operation and the key; use errors.Is with these
// sentinels to tell the cases apart.
var (
	// ErrInvalidKey means the key is empty, longer than MaxKeyLen bytes, not
	// valid UTF-8, or contains a NUL byte.
	ErrInvalidKey = errors.New("invalid key")
	// ErrInvalidTTL means the TTL is not positive, or outside the range the
	// driver can honour (driver.TTLLimiter). It is never rounded.
	ErrInvalidTTL = errors.New("invalid TTL")
	// ErrInvalidOption means an option value is out of range, such as a
	// renewal interval not shorter than the TTL.
	ErrInvalidOption = errors.New("invalid option")
	// ErrNilDriver means the lock was made with a nil driver.
	ErrNilDriver = errors.New("nil driver")
	// ErrNilContext means a nil context.Context was passed.
	ErrNilContext = errors.New("nil context")
	// ErrNotHeld means the handle does not hold the lock: it was never
	// locked, already unlocked, or (from a driver) the lease is gone.
	// It is the same value as driver.ErrNotHeld.
	ErrNotHeld = driver.ErrNotHeld
	// ErrLocked means another owner holds the key. It is the same value as
	// driver.ErrLocked.
	ErrLocked = driver.ErrLocked
	// ErrLost means a hold ended without Unlock: the backend reported it
	// gone, or no renewal was confirmed before the local deadline.
	ErrLost = errors.New("hold lost")
)

// An Error records the operation and key of a failed lock call, and the
// error that caused it.
type Error struct {
	Op  string // "lock", "unlock", "rlock", "runlock", "trylock", "tryrlock", "renew"
	Key string
	Err error
}

// Error implements error, in the form `locker: lock "orders/42": hold lost`.
func (e *Error) Error() string {
	return "locker: " + e.Op + " " + strconv.Quote(e.Key) + ": " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

func opError(op, key string, err error) error {
	var le *Error
	if errors.As(err, &le) && le.Op == op && le.Key == key {
		return err
	}
	return &Error{Op: op, Key: key, Err: err}
}

// isInputError reports whether err can only be cured by changing the code:
// a bad key, TTL, option, driver or context, or a capability the driver
// lacks.
func isInputError(err error) bool {
	for _, target := range []error{ErrInvalidKey, ErrInvalidTTL, ErrInvalidOption, ErrNilDriver, ErrNilContext, errors.ErrUnsupported} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
