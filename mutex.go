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
// Acquire is Lock that returns the hold itself, a *Hold with the fencing
// token, Done, Err, a Context for work under the lock, Refresh and
// Release; the hold's Release and the Mutex's Unlock are two ways to end
// it.
//
// While it is held the lease is renewed in the background (unless
// WithFixedLease). If it is lost (the backend says so, or no renewal was
// confirmed in time) Done closes, Err reports the reason, and the next
// Unlock reports it too. Other lock calls for the key, through other
// handles of the process, go ahead at once; this handle, like a sync.Mutex,
// still needs its Unlock before it locks again.
//
// Make a Mutex with Client.Mutex or NewMutex: the zero Mutex has no
// backend, and its methods fail with an error wrapping ErrZeroValue (Lock
// and TryLock panic with it). A Mutex must not be copied after first use.
//
// Every lock type of this package offers the same three forms where it
// can: the sync forms Lock, Unlock and TryLock() bool; the context forms
// LockContext, UnlockContext and TryLockContext(ctx) (bool, error); and
// the hold forms Acquire(ctx) (*Hold, error) and TryAcquire(ctx) (*Hold,
// error), whose try reports a key held elsewhere as an error wrapping
// ErrLocked, since it has no hold to return.
type Mutex struct {
	handle
}

// NewMutex returns a Mutex for key on d. It does no I/O: a bad key, TTL or
// driver is reported by the first lock call, as an *Error wrapping
// ErrInvalidKey, ErrInvalidTTL or ErrNilDriver.
//
// The Mutex locks through the default Client of d: one per driver value in
// the process, which every handle of NewMutex, NewRWMutex and
// NewReentrantMutex over d uses while it locks or holds (see "Clients and
// handles" in the package documentation). So such handles, made anywhere
// and at any time, wait in one line per key in the process and have their
// renewals batched, as the handles of one Client do; once unlocked, a
// handle keeps nothing alive. opts apply to this handle alone, as there
// are no Client defaults. There is no Close: make handles from a Client
// (New) for that.
func NewMutex(d driver.Driver, key string, opts ...Option) *Mutex {
	m := &Mutex{}
	m.initDefault(d, key, opts)
	return m
}

// Key returns the key m locks.
func (m *Mutex) Key() string { return m.key }

// Lock locks m, waiting as long as it takes. Transient backend errors are
// retried with backoff and reported to the error handler. Lock panics with
// the *Error if the lock can never be acquired: a zero Mutex, a bad key,
// TTL, option or driver, a permanent backend error (such as a closed
// backend client), or a closed Client.
func (m *Mutex) Lock() { m.mustLock(m.Acquire(context.Background())) }

// LockContext locks m, waiting until it is held, ctx is done, or a
// permanent error occurs; transient backend errors are retried. It returns
// by ctx's deadline even when the backend does not answer. On error the
// error is an *Error wrapping ctx.Err() or the cause, and whatever the call
// may have left on the backend is removed in the background (later lock
// calls for the key through the same Client wait for that).
func (m *Mutex) LockContext(ctx context.Context) error {
	_, err := m.Acquire(ctx)
	return err
}

// Acquire locks m as LockContext does and returns the hold.
func (m *Mutex) Acquire(ctx context.Context) (*Hold, error) {
	return m.lock(ctx, kindMutex, "lock", driver.Exclusive, false)
}

// TryLock tries to lock m once, without waiting, and reports whether it
// succeeded. It gives up after the try timeout (WithTryTimeout, 1s by
// default) when the backend does not answer. Any failure of the attempt,
// a backend error, a closed backend client or a closed Client, is a false
// result, and its error goes to the error handler (ErrClosed excepted).
// Like Lock, and like package sync on misuse, it panics on errors that
// only a change of the code can cure: a zero Mutex, a bad key, TTL, option
// or driver.
func (m *Mutex) TryLock() bool { return m.tryLock(kindMutex, "trylock", driver.Exclusive) }

// TryLockContext tries to lock m once, without waiting. It reports false
// and no error when the key is held elsewhere (or through this handle),
// and false and the error when the attempt failed.
func (m *Mutex) TryLockContext(ctx context.Context) (bool, error) {
	return m.tryLockContext(ctx, kindMutex, "trylock", driver.Exclusive)
}

// TryAcquire tries to lock m once, without waiting, and returns the hold.
// When the key is held elsewhere (or through this handle) it returns an
// *Error wrapping ErrLocked.
func (m *Mutex) TryAcquire(ctx context.Context) (*Hold, error) {
	return m.tryAcquire(ctx, kindMutex, "trylock", driver.Exclusive)
}

// Unlock unlocks m. It is a run-time error, as with sync.Mutex, if m is not
// locked: Unlock panics. A hold that was lost or ended by Client.Close is
// still locked in this sense: Unlock then ends it without panicking, and
// reports a loss to the error handler, as it does backend errors (the
// release is then retried in the background, see Hold.Release).
func (m *Mutex) Unlock() { m.unlock(driver.Exclusive, "unlock", "unlock of unlocked Mutex") }

// UnlockContext unlocks m and returns an *Error wrapping ErrNotHeld if m is
// not locked, wrapping ErrLost or ErrClosed if the hold ended so, or
// wrapping the backend error if the release failed (it is then retried in
// the background, see Hold.Release). In every case m is unlocked when it returns, which is by
// ctx's deadline (see Hold.Release).
func (m *Mutex) UnlockContext(ctx context.Context) error {
	return m.unlockContext(ctx, driver.Exclusive, "unlock")
}

// Token returns the fencing token of the current hold, or 0 if m has never
// been locked. After an unlock or a loss it returns the ended hold's token.
func (m *Mutex) Token() Token { return m.token() }

// Done returns a channel that is closed when the current hold ends, by
// Unlock, by loss or by Client.Close. If m is not locked the channel is
// already closed.
func (m *Mutex) Done() <-chan struct{} { return m.doneChan() }

// Err returns nil while m is held and after a successful Unlock, and an
// *Error wrapping ErrLost or ErrClosed after the hold ended so (until the
// next lock).
func (m *Mutex) Err() error { return m.errValue() }
