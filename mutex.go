package locker

import (
	"context"

	"github.com/go-locker/locker/driver"
)

// A Mutex is a mutual exclusion lock on one key of a backend, shared by
// every process that uses the same key on the same backend.
//
// A Mutex is a handle: it may be used by many goroutines, and then behaves
// like a sync.Mutex: Lock waits until the handle's current hold is
// unlocked, and any goroutine may call Unlock. Handles made for the same key
// exclude each other, in this process as in any other. A locked Mutex is
// not associated with a particular goroutine.
//
// While it is held the lease is renewed in the background. If it is lost
// (the backend says so, or no renewal was confirmed in time) Done closes,
// Err reports the reason, and the next Unlock reports it too. A lost hold
// is still ended by Unlock, as with sync.Mutex every Lock needs its Unlock:
// until then other lock calls for the key in this process wait, and a
// second Lock on the handle waits.
//
// A Mutex must not be copied after first use.
type Mutex struct {
	handle // last: the current hold, or the last one after Unlock
}

// NewMutex returns a Mutex for key on d. It does no I/O: a bad key, TTL or
// driver is reported by the first lock call, as an *Error wrapping
// ErrInvalidKey, ErrInvalidTTL or ErrNilDriver.
func NewMutex(d driver.Driver, key string, opts ...Option) *Mutex {
	m := &Mutex{}
	m.init(d, key, opts)
	return m
}

// Key returns the key m locks.
func (m *Mutex) Key() string { return m.key }

// Lock locks m, waiting as long as it takes. Transient backend errors are
// retried with backoff and reported to the error handler. Lock panics with
// the *Error if the lock can never be acquired: a bad key, TTL, option or
// driver, or a permanent backend error.
func (m *Mutex) Lock() { m.mustLock(m.LockContext(context.Background())) }

// LockContext locks m, waiting until it is held, ctx is done, or a
// permanent error occurs; transient backend errors are retried. On error
// nothing is left held or queued on the backend, and the error is an *Error
// wrapping ctx.Err() or the cause.
func (m *Mutex) LockContext(ctx context.Context) error {
	_, err := m.lock(ctx, "lock", false)
	return err
}

// TryLock tries to lock m once, without waiting, and reports whether it
// succeeded. A backend error counts as failure and goes to the error
// handler. Like Lock it panics on a bad key, TTL, option or driver.
func (m *Mutex) TryLock() bool { return m.reportTry(m.lock(context.Background(), "trylock", true)) }

// TryLockContext tries to lock m once, without waiting. It reports false
// and no error when the key is held elsewhere (or by another goroutine
// through this process), and false and the error when the attempt failed.
func (m *Mutex) TryLockContext(ctx context.Context) (bool, error) {
	return m.lock(ctx, "trylock", true)
}

func (m *Mutex) lock(ctx context.Context, op string, try bool) (bool, error) {
	h, err := m.acquire(ctx, op, driver.Exclusive, try)
	if h == nil {
		return false, err
	}
	m.mu.Lock()
	m.last = h
	m.mu.Unlock()
	return true, nil
}

// Unlock unlocks m. It is a run-time error, as with sync.Mutex, if m is not
// locked: Unlock panics. A hold that was lost is still locked in this sense:
// Unlock then ends it without panicking and reports the loss to the error
// handler, as it does backend errors (the lease expires on its own).
func (m *Mutex) Unlock() { m.unlockOrPanic(m.take(), "unlock", "unlock of unlocked Mutex") }

// UnlockContext unlocks m and returns an *Error wrapping ErrNotHeld if m is
// not locked, wrapping ErrLost if the hold was lost, or wrapping the backend
// error if the release failed (the lease then expires on its own). In every
// case m is unlocked when it returns. A done ctx does not stop the release:
// it runs on a fresh context bounded by the TTL.
func (m *Mutex) UnlockContext(ctx context.Context) error {
	return m.unlockContext(ctx, m.take(), "unlock")
}

// take claims the current hold for unlocking, once.
func (m *Mutex) take() *hold {
	m.mu.Lock()
	defer m.mu.Unlock()
	return claimLocked(m.last)
}

// Token returns the fencing token of the current hold, or 0 if m has never
// been locked. After an unlock or a loss it returns the ended hold's token.
func (m *Mutex) Token() Token { return m.token() }

// Done returns a channel that is closed when the current hold ends, by
// Unlock or by loss. If m is not locked the channel is already closed.
func (m *Mutex) Done() <-chan struct{} { return m.done() }

// Err returns nil while m is held and after a successful Unlock, and an
// *Error wrapping ErrLost after the hold was lost.
func (m *Mutex) Err() error { return m.err() }
