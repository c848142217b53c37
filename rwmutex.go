package locker

import (
	"context"
	"sync"

	"github.com/go-locker/locker/driver"
)

// An RWMutex is a reader/writer lock on one key of a backend: any number of
// readers, in any processes, or one writer.
//
// Each read lock is a hold of its own on the backend (in driver.Shared
// mode) with its own lease and token, so a reader that dies expires on its
// own while others keep renewing; RAcquire returns it. Read locking needs a
// driver whose Capabilities report Shared; on other drivers it returns an
// error wrapping errors.ErrUnsupported.
//
// Writers are not starved by a stream of readers. Within a handle, as in
// sync.RWMutex, a waiting writer keeps new readers out; within a Client,
// lock calls on a key are served in arrival order; across processes, a
// writer that has waited longer than the fairness threshold joins the
// backend's wait queue (drivers that keep one, driver.Capabilities.Queue),
// and readers
// that arrive after it wait behind it.
//
// Read-to-write upgrades are not supported: Lock while holding a read lock
// through the same handle waits for ever for that read lock.
//
// Done and Err report on all of the handle's current holds: Done closes as
// soon as any of them ends by loss or Client.Close (or when the last is
// unlocked), and Err reports the first such end. Token reports the write
// hold, or the most recent read hold.
//
// Make an RWMutex with Client.RWMutex or NewRWMutex: the zero RWMutex
// fails as the zero Mutex does (ErrZeroValue). It has Mutex's three forms
// on each side: Lock, Unlock, TryLock, LockContext, UnlockContext,
// TryLockContext, Acquire and TryAcquire for writing, and RLock, RUnlock,
// TryRLock, RLockContext, RUnlockContext, TryRLockContext, RAcquire and
// TryRAcquire for reading. An RWMutex must not be copied after first use.
type RWMutex struct {
	handle
}

// NewRWMutex returns an RWMutex for key on d that locks through the
// default Client of d, as NewMutex does.
func NewRWMutex(d driver.Driver, key string, opts ...Option) *RWMutex {
	rw := &RWMutex{}
	rw.initDefault(d, key, opts)
	return rw
}

// Key returns the key rw locks.
func (rw *RWMutex) Key() string { return rw.key }

// Lock locks rw for writing, as Mutex.Lock does.
func (rw *RWMutex) Lock() { rw.mustLock(rw.Acquire(context.Background())) }

// LockContext locks rw for writing, as Mutex.LockContext does.
func (rw *RWMutex) LockContext(ctx context.Context) error {
	_, err := rw.Acquire(ctx)
	return err
}

// Acquire locks rw for writing and returns the hold, as Mutex.Acquire
// does.
func (rw *RWMutex) Acquire(ctx context.Context) (*Hold, error) {
	return rw.lock(ctx, kindRWMutex, "lock", driver.Exclusive, false)
}

// TryLock tries once to lock rw for writing, as Mutex.TryLock does.
func (rw *RWMutex) TryLock() bool { return rw.tryLock(kindRWMutex, "trylock", driver.Exclusive) }

// TryLockContext tries once to lock rw for writing, as
// Mutex.TryLockContext does.
func (rw *RWMutex) TryLockContext(ctx context.Context) (bool, error) {
	return rw.tryLockContext(ctx, kindRWMutex, "trylock", driver.Exclusive)
}

// TryAcquire tries once to lock rw for writing and returns the hold, as
// Mutex.TryAcquire does: a key held elsewhere (or through this handle) is
// an *Error wrapping ErrLocked.
func (rw *RWMutex) TryAcquire(ctx context.Context) (*Hold, error) {
	return rw.tryAcquire(ctx, kindRWMutex, "trylock", driver.Exclusive)
}

// RLock locks rw for reading, waiting as long as it takes. Like Lock it
// retries transient errors and panics if the lock can never be acquired,
// including on a driver without shared mode.
func (rw *RWMutex) RLock() { rw.mustLock(rw.RAcquire(context.Background())) }

// RLockContext locks rw for reading, waiting until it is held, ctx is
// done, or a permanent error occurs.
func (rw *RWMutex) RLockContext(ctx context.Context) error {
	_, err := rw.RAcquire(ctx)
	return err
}

// RAcquire locks rw for reading as RLockContext does and returns the read
// hold, which is this reader's own.
func (rw *RWMutex) RAcquire(ctx context.Context) (*Hold, error) {
	return rw.lock(ctx, kindRWMutex, "rlock", driver.Shared, false)
}

// TryRLock tries once to lock rw for reading and reports whether it
// succeeded, as TryLock does.
func (rw *RWMutex) TryRLock() bool { return rw.tryLock(kindRWMutex, "tryrlock", driver.Shared) }

// TryRLockContext tries once to lock rw for reading. It reports false and
// no error when a writer holds the key (or waits for it through this
// handle), and false and the error when the attempt failed.
func (rw *RWMutex) TryRLockContext(ctx context.Context) (bool, error) {
	return rw.tryLockContext(ctx, kindRWMutex, "tryrlock", driver.Shared)
}

// TryRAcquire tries once to lock rw for reading and returns the read hold;
// a key held for writing is an *Error wrapping ErrLocked.
func (rw *RWMutex) TryRAcquire(ctx context.Context) (*Hold, error) {
	return rw.tryAcquire(ctx, kindRWMutex, "tryrlock", driver.Shared)
}

// Unlock unlocks rw for writing, as Mutex.Unlock does: it panics if rw is
// not write locked.
func (rw *RWMutex) Unlock() { rw.unlock(driver.Exclusive, "unlock", "unlock of unlocked RWMutex") }

// UnlockContext unlocks rw for writing, as Mutex.UnlockContext does.
func (rw *RWMutex) UnlockContext(ctx context.Context) error {
	return rw.unlockContext(ctx, driver.Exclusive, "unlock")
}

// RUnlock undoes one RLock, releasing the most recent read hold of rw
// whose release has not begun. It panics if rw has no read lock.
func (rw *RWMutex) RUnlock() {
	rw.unlock(driver.Shared, "runlock", "RUnlock of unlocked RWMutex")
}

// RUnlockContext undoes one RLock, returning an *Error wrapping ErrNotHeld
// if rw has no read lock, or wrapping ErrLost or ErrClosed if the hold
// ended so.
func (rw *RWMutex) RUnlockContext(ctx context.Context) error {
	return rw.unlockContext(ctx, driver.Shared, "runlock")
}

// RLocker returns a sync.Locker whose Lock and Unlock call rw.RLock and
// rw.RUnlock.
func (rw *RWMutex) RLocker() sync.Locker { return (*rlocker)(rw) }

type rlocker RWMutex

func (r *rlocker) Lock()   { (*RWMutex)(r).RLock() }
func (r *rlocker) Unlock() { (*RWMutex)(r).RUnlock() }

// Token returns the fencing token of the write hold, or of the most recent
// read hold, or 0 if rw has never been locked.
func (rw *RWMutex) Token() Token { return rw.token() }

// Done returns a channel that is closed when any of rw's current holds
// ends by loss or Client.Close, or when the last is unlocked. If rw is not
// locked the channel is already closed.
func (rw *RWMutex) Done() <-chan struct{} { return rw.doneChan() }

// Err returns an *Error wrapping ErrLost or ErrClosed if one of rw's
// current holds (or, once all are unlocked, of the last ones) ended so,
// and nil otherwise.
func (rw *RWMutex) Err() error { return rw.errValue() }
