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
	_   noCopy
	drv driver.Driver
	key string
	cfg config

	mu      sync.Mutex
	w       *hold   // current or last write hold
	readers []*hold // read holds not yet unlocked, most recent last
	last    *hold   // the hold Token, Done and Err report
}

// NewRWMutex returns an RWMutex for key on d. Like NewMutex it does no I/O.
func NewRWMutex(d driver.Driver, key string, opts ...Option) *RWMutex {
	return &RWMutex{drv: d, key: key, cfg: newConfig(opts)}
}

// Key returns the key rw locks.
func (rw *RWMutex) Key() string { return rw.key }

func (rw *RWMutex) lock(ctx context.Context, op string, mode driver.Mode, try bool) (bool, error) {
	h, err := acquire(ctx, lockOp{op: op, drv: rw.drv, key: rw.key, mode: mode, cfg: &rw.cfg, try: try})
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
func (rw *RWMutex) Lock() {
	if _, err := rw.lock(context.Background(), "lock", driver.Exclusive, false); err != nil {
		panic(err)
	}
}

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
func (rw *RWMutex) RLock() {
	if _, err := rw.lock(context.Background(), "rlock", driver.Shared, false); err != nil {
		panic(err)
	}
}

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

func (rw *RWMutex) reportTry(ok bool, err error) bool {
	if err != nil {
		if isInputError(err) {
			panic(err)
		}
		rw.cfg.reportError(err)
	}
	return ok
}

// Unlock unlocks rw for writing, as Mutex.Unlock does: it panics if rw is
// not write locked.
func (rw *RWMutex) Unlock() {
	h := rw.takeWrite()
	if h == nil {
		panic("locker: unlock of unlocked RWMutex")
	}
	if err := h.unlock(context.Background(), "unlock"); err != nil {
		rw.cfg.reportError(err)
	}
}

// UnlockContext unlocks rw for writing, as Mutex.UnlockContext does.
func (rw *RWMutex) UnlockContext(ctx context.Context) error {
	h := rw.takeWrite()
	if h == nil {
		return opError("unlock", rw.key, ErrNotHeld)
	}
	return h.unlock(ctx, "unlock")
}

// RUnlock undoes one RLock. It panics if rw has no read lock. Which of
// several read holds of rw it releases is unspecified: they are alike.
func (rw *RWMutex) RUnlock() {
	h := rw.takeRead()
	if h == nil {
		panic("locker: RUnlock of unlocked RWMutex")
	}
	if err := h.unlock(context.Background(), "runlock"); err != nil {
		rw.cfg.reportError(err)
	}
}

// RUnlockContext undoes one RLock, returning an *Error wrapping ErrNotHeld
// if rw has no read lock, or wrapping ErrLost if the hold was lost.
func (rw *RWMutex) RUnlockContext(ctx context.Context) error {
	h := rw.takeRead()
	if h == nil {
		return opError("runlock", rw.key, ErrNotHeld)
	}
	return h.unlock(ctx, "runlock")
}

func (rw *RWMutex) takeWrite() *hold {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	h := rw.w
	if h == nil || h.unlocking {
		return nil
	}
	h.unlocking = true
	return h
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
	h.unlocking = true
	if n > 1 && rw.last == h {
		rw.last = rw.readers[n-2]
	}
	return h
}

// RLocker returns a sync.Locker whose Lock and Unlock call rw.RLock and
// rw.RUnlock.
func (rw *RWMutex) RLocker() sync.Locker { return (*rlocker)(rw) }

type rlocker RWMutex

func (r *rlocker) Lock()   { (*RWMutex)(r).RLock() }
func (r *rlocker) Unlock() { (*RWMutex)(r).RUnlock() }

// Token returns the fencing token of the write hold, or of the most recent
// read hold, or 0 if rw has never been locked.
func (rw *RWMutex) Token() Token {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.last == nil {
		return 0
	}
	return rw.last.token()
}

// Done returns a channel that is closed when the hold Token reports ends.
// If rw is not locked the channel is already closed.
func (rw *RWMutex) Done() <-chan struct{} {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return doneOf(rw.last)
}

// Err returns an *Error wrapping ErrLost if the hold Token reports was
// lost, and nil otherwise.
func (rw *RWMutex) Err() error {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.last == nil {
		return nil
	}
	_, err := rw.last.status()
	return err
}
