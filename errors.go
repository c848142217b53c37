package locker

import (
	"cmp"
	"errors"
	"strings"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
)

// Errors reported by this package. Every error returned by a lock method is
// an *Error naming the operation and the key; use errors.Is with these
// sentinels to tell the cases apart.
var (
	// ErrInvalidKey means the key is empty, longer than MaxKeyLen bytes, not
	// valid UTF-8, or contains a NUL byte.
	ErrInvalidKey = errors.New("invalid key")
	// ErrInvalidTTL means the TTL is not positive, or outside the range the
	// driver can honour (driver.Capabilities: MinTTL, MaxTTL, TTLUnit). It
	// is never rounded.
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
	// ErrLocked means another owner holds the key: TryAcquire returns it
	// when the key is taken. It is the same value as driver.ErrLocked.
	ErrLocked = driver.ErrLocked
	// ErrLost means a hold ended without Unlock: the backend reported it
	// gone, or no renewal was confirmed before the local deadline.
	ErrLost = errors.New("hold lost")
	// ErrClosed means the Client was closed: lock calls through it fail
	// with it, and the holds it ended by Close report it.
	ErrClosed = errors.New("client closed")
	// ErrInvalidWeight means a Semaphore was made with a size below 1, or
	// asked for a weight outside [1, size].
	ErrInvalidWeight = errors.New("invalid weight")
	// ErrLimitMismatch means a Semaphore's size differs from the size
	// that the key's holders in other handles or processes use: every
	// user of a semaphore must agree on it. It is the same value as
	// driver.ErrLimitMismatch; errors.As with *driver.LimitError tells
	// the other size.
	ErrLimitMismatch = driver.ErrLimitMismatch
	// ErrInvalidValue means an Election's value is longer than
	// driver.MaxValueLen bytes.
	ErrInvalidValue = errors.New("invalid value")
	// ErrNoLeader means an election has no leader: Election.Leader
	// returns it.
	ErrNoLeader = errors.New("no leader")
)

// An Error records the operation and key of a failed lock call, and the
// error that caused it.
type Error struct {
	// Op is the operation: "lock", "trylock", "rlock", "tryrlock",
	// "enter", "tryenter" and "leave" (ReentrantMutex),
	// "acquire" and "tryacquire" (Semaphore), "campaign", "resign",
	// "leader" and "observe" (Election), "multilock" and "trymultilock"
	// (MultiLock), "unlock", "runlock", "refresh", "release", "hold" (the
	// state of a hold, from Err), "cleanup" (the background removal of
	// what an abandoned call left), "renew" (a renewal of the watchdog) or
	// "close".
	Op  string
	Key string // the key, whole; the message cuts it (see Error)
	Err error
}

// Error implements error, in the form `locker: lock "orders/42": hold lost`.
// The message has one "locker:" prefix, whatever Err wraps, and quotes at
// most the first driver.MaxQuotedKeyLen (64) bytes of the key.
//
// The prefix is the only place the message names the operation and the
// key. The cause is formatted from its fields: a wrapped *Error of the same
// key adds its cause, and a driver's *driverkit.OpError of the same key
// (`redisdriver: acquire "s2": limit differs`) its driver and cause:
// `locker: acquire "s2": redisdriver: limit differs (theirs: 3)`. Other
// errors keep their text; one that wraps such an error, as fmt.Errorf
// with a final %w or errors.Join do, formats it the same way in its
// place. Only the message is shortened: errors.As still finds the
// driver's error with its Op and Key.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("locker: ")
	e.writeTo(&b, "")
	return b.String()
}

// writeTo writes e's message without the "locker: " prefix, and without
// its operation and key when they are outer's, the key of an *Error
// that wraps e.
func (e *Error) writeTo(b *strings.Builder, outer string) {
	if e.Key == "" || e.Key != outer {
		b.WriteString(e.Op)
		if e.Key != "" {
			if e.Op != "" {
				b.WriteByte(' ')
			}
			b.WriteString(driver.QuoteKey(e.Key))
		}
		if e.Op != "" || e.Key != "" { // a zero Error says "locker: <nil>"
			b.WriteString(": ")
		}
	}
	writeCause(b, e.Err, cmp.Or(e.Key, outer))
}

// writeCause writes err, the cause of an *Error of key, from its fields:
// an *Error or a *driverkit.OpError of key does not name key again. An
// error of another type keeps its text; if it wraps one of those, as
// fmt.Errorf with a final %w or errors.Join do (its text ends with its
// cause's, or is its causes' joined by newlines), the cause is written the
// same way in its place.
func writeCause(b *strings.Builder, err error, key string) {
	switch e := err.(type) {
	case nil:
		b.WriteString("<nil>")
		return
	case *Error:
		e.writeTo(b, key)
		return
	case *driverkit.OpError:
		b.WriteString(e.Driver)
		b.WriteString(": ")
		if key == "" || e.Key != key {
			b.WriteString(e.Op + " " + driver.QuoteKey(e.Key) + ": ")
		}
		writeCause(b, e.Err, key)
		return
	}
	msg := err.Error()
	if key == "" || !namesKey(err, key) {
		b.WriteString(msg)
		return
	}
	var causes []error
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		causes = []error{u.Unwrap()}
	case interface{ Unwrap() []error }:
		causes = u.Unwrap()
	}
	texts := make([]string, len(causes))
	for i, c := range causes {
		if c != nil {
			texts[i] = c.Error()
		}
	}
	switch {
	case len(causes) > 1 && msg == strings.Join(texts, "\n"): // errors.Join
		for i, c := range causes {
			if i > 0 {
				b.WriteByte('\n')
			}
			writeCause(b, c, key)
		}
	case len(causes) > 0 && causes[len(causes)-1] != nil && strings.HasSuffix(msg, texts[len(texts)-1]):
		b.WriteString(msg[:len(msg)-len(texts[len(texts)-1])])
		writeCause(b, causes[len(causes)-1], key)
	default:
		b.WriteString(msg)
	}
}

// namesKey reports whether err's chain holds an *Error or a
// *driverkit.OpError of key.
func namesKey(err error, key string) bool {
	for err != nil {
		switch e := err.(type) {
		case *Error:
			if e.Key == key {
				return true
			}
		case *driverkit.OpError:
			if e.Key == key {
				return true
			}
		case interface{ Unwrap() []error }:
			for _, c := range e.Unwrap() {
				if namesKey(c, key) {
					return true
				}
			}
			return false
		}
		err = errors.Unwrap(err)
	}
	return false
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

// isFinal reports whether no retry of a lock call can cure err: an input
// error, a permanent backend error, or a closed Client.
func isFinal(err error) bool {
	return isInputError(err) || driver.IsPermanent(err) || errors.Is(err, ErrClosed)
}

// isClosed reports whether err says the Client was closed.
func isClosed(err error) bool { return errors.Is(err, ErrClosed) }

// isInputError reports whether err can only be cured by changing the code:
// a zero value, a bad key, TTL, option, driver or context, or a capability
// the driver lacks.
func isInputError(err error) bool {
	for _, target := range []error{ErrInvalidKey, ErrInvalidTTL, ErrInvalidOption, ErrNilDriver, ErrNilContext,
		ErrZeroValue, errors.ErrUnsupported, ErrInvalidWeight, ErrInvalidValue, ErrLimitMismatch} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
