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
// mode) with its own lease, so a reader that dies expires on its own while
// others keep renewing. Read locking needs a driver that implements
// driver.Sharer; on other drivers it returns an error wrapping
// errors.ErrUnsupported.
//
// Writers are not starved by a stream of readers. Within a process, lock
// calls on a key are served in arrival order, so a waiting writer blocks
// later readers. Across processes, a writer that has waited longer than the
// fairness threshold joins the backend's wait queue (drivers implementing
// driver.Queuer), and readers that arrive after it wait behind it.
//
// Like sync.RWMutex, an RWMutex may be used by many goroutines; a goroutine
// must not expect to read-lock it again while it holds a read lock if a
// writer may be waiting. Read-to-write upgrades are not supported: Lock
// while holding a read lock waits forever for that read lock.
//
// Token, Done and Err report the write hold while the RWMutex is write
// locked, and otherwise its most recent read hold.
//
// An RWMutex must not be copied after first use.
type RWMutex struct {
	handle          // last: the hold Token, Done and Err report
	w       *hold   // current or last write hold; guarded by mu
	readers []*hold // read holds not yet unlocked, most recent last; guarded by mu
}

// NewRWMutex returns an RWMutex for key on d. Like NewMutex it does no I/O.
func NewRWMutex(d driver.Driver, key string, opts ...Option) *RWMutex {
	rw := &RWMutex{}
	rw.init(d, key, opts)
	return rw
}

// Key returns the key rw locks.
func (rw *RWMutex) Key() string { return rw.key }

func (rw *RWMutex) lock(ctx context.Context, op string, mode driver.Mode, try bool) (bool, error) {
	h, err := rw.acquire(ctx, op, mode, try)
	if h == nil {
		return false, err
	}
	rw.mu.Lock()
	if mode == driver.Shared {
		rw.readers = append(rw.readers, h)
	} else {
		rw.w = h
	}
	rw.last = h
	rw.mu.Unlock()
	return true, nil
}

// Lock locks rw for writing, as Mutex.Lock does.
func (rw *RWMutex) Lock() { rw.mustLock(rw.LockContext(context.Background())) }

// LockContext locks rw for writing, as Mutex.LockContext does.
func (rw *RWMutex) LockContext(ctx context.Context) error {
	_, err := rw.lock(ctx, "lock", driver.Exclusive, false)
	return err
}

// TryLock tries once to lock rw for writing, as Mutex.TryLock does.
func (rw *RWMutex) TryLock() bool {
	return rw.reportTry(rw.lock(context.Background(), "trylock", driver.Exclusive, true))
}

// TryLockContext tries once to lock rw for writing, as
// Mutex.TryLockContext does.
func (rw *RWMutex) TryLockContext(ctx context.Context) (bool, error) {
	return rw.lock(ctx, "trylock", driver.Exclusive, true)
}

// RLock locks rw for reading, waiting as long as it takes. Like Lock it
// retries transient errors and panics if the lock can never be acquired,
// including on a driver without shared mode.
func (rw *RWMutex) RLock() { rw.mustLock(rw.RLockContext(context.Background())) }

// RLockContext locks rw for reading, waiting until it is held, ctx is
// done, or a permanent error occurs.
func (rw *RWMutex) RLockContext(ctx context.Context) error {
	_, err := rw.lock(ctx, "rlock", driver.Shared, false)
	return err
}

// TryRLock tries once to lock rw for reading and reports whether it
// succeeded.
func (rw *RWMutex) TryRLock() bool {
	return rw.reportTry(rw.lock(context.Background(), "tryrlock", driver.Shared, true))
}

// TryRLockContext tries once to lock rw for reading.
func (rw *RWMutex) TryRLockContext(ctx context.Context) (bool, error) {
	return rw.lock(ctx, "tryrlock", driver.Shared, true)
}

// Unlock unlocks rw for writing, as Mutex.Unlock does: it panics if rw is
// not write locked.
func (rw *RWMutex) Unlock() { rw.unlockOrPanic(rw.takeWrite(), "unlock", "unlock of unlocked RWMutex") }

// UnlockContext unlocks rw for writing, as Mutex.UnlockContext does.
func (rw *RWMutex) UnlockContext(ctx context.Context) error {
	return rw.unlockContext(ctx, rw.takeWrite(), "unlock")
}

// RUnlock undoes one RLock. It panics if rw has no read lock. Which of
// several read holds of rw it releases is unspecified: they are alike.
func (rw *RWMutex) RUnlock() {
	rw.unlockOrPanic(rw.takeRead(), "runlock", "RUnlock of unlocked RWMutex")
}

// RUnlockContext undoes one RLock, returning an *Error wrapping ErrNotHeld
// if rw has no read lock, or wrapping ErrLost if the hold was lost.
func (rw *RWMutex) RUnlockContext(ctx context.Context) error {
	return rw.unlockContext(ctx, rw.takeRead(), "runlock")
}

func (rw *RWMutex) takeWrite() *hold {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return claimLocked(rw.w)
}

func (rw *RWMutex) takeRead() *hold {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	n := len(rw.readers)
	if n == 0 {
		return nil
	}
	h := rw.readers[n-1]
	rw.readers[n-1] = nil
	rw.readers = rw.readers[:n-1]
	if n > 1 && rw.last == h {
		rw.last = rw.readers[n-2]
	}
	return claimLocked(h)
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

// Done returns a channel that is closed when the hold Token reports ends.
// If rw is not locked the channel is already closed.
func (rw *RWMutex) Done() <-chan struct{} { return rw.done() }

// Err returns an *Error wrapping ErrLost if the hold Token reports was
// lost, and nil otherwise.
func (rw *RWMutex) Err() error { return rw.err() }
