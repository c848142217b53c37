package locker

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-locker/locker/driver"
)

// MaxReentry is how many times a ReentrantMutex hold may be entered at
// once; Lock beyond it returns an error wrapping ErrReentryLimit.
const MaxReentry = 1 << 20

// ErrReentryLimit means a hold was entered MaxReentry times without an
// Unlock.
var ErrReentryLimit = errors.New("reentry limit reached")

// A ReentrantMutex is an exclusive lock that the same logical operation may
// lock again while it holds it.
//
// Go has no goroutine identity, so the owner is explicit: it travels in the
// context. Lock returns a context that carries the hold; a Lock with that
// context (or one derived from it) on the same driver and key, through this
// or any other ReentrantMutex, enters the hold again instead of waiting,
// returns the same fencing token, and must be matched by one more Unlock.
// A Lock with a context that does not carry the hold is a new owner and
// waits, even in the same goroutine: two goroutines share a hold only when
// one was given the other's context.
//
// The context Lock returns is canceled, with cause an error wrapping ErrLost,
// when the hold is lost, and with cause ErrNotHeld after the last Unlock, so
// work done under it stops when the lock is gone.
//
// A ReentrantMutex must not be copied after first use.
type ReentrantMutex struct {
	_   noCopy
	drv driver.Driver
	key string
	cfg config
}

// NewReentrantMutex returns a ReentrantMutex for key on d. Like NewMutex it
// does no I/O.
func NewReentrantMutex(d driver.Driver, key string, opts ...Option) *ReentrantMutex {
	return &ReentrantMutex{drv: d, key: key, cfg: newConfig(opts)}
}

// Key returns the key r locks.
func (r *ReentrantMutex) Key() string { return r.key }

// reentrantHold is a hold with its entry count, stored in contexts.
type reentrantHold struct {
	h     *hold
	mu    sync.Mutex
	count int
}

// reentryKey identifies a hold in a context: the engine (shared by all
// handles on one driver) and the key. A driver without an engine of its own
// in the registry is identified by the handle.
type reentryKey struct {
	id  any
	key string
}

func (r *ReentrantMutex) held(ctx context.Context) *reentrantHold {
	if ctx == nil || r.drv == nil {
		return nil
	}
	var key any = reentryKey{r, r.key}
	if comparableDriver(r.drv) {
		registry.Lock()
		e := registry.m[r.drv]
		registry.Unlock()
		if e == nil {
			return nil // no live hold on this driver in the process
		}
		key = reentryKey{e, r.key}
	}
	rh, _ := ctx.Value(key).(*reentrantHold)
	return rh
}

// Lock locks r for the operation ctx belongs to, waiting if another owner
// holds the key. It returns the context to pass to nested Lock calls and
// to Unlock. On error nothing is held and the error is an *Error.
func (r *ReentrantMutex) Lock(ctx context.Context) (context.Context, error) {
	return r.lock(ctx, "lock", false)
}

// TryLock is Lock without waiting: it reports false and no error when
// another owner holds the key.
func (r *ReentrantMutex) TryLock(ctx context.Context) (context.Context, bool, error) {
	lctx, err := r.lock(ctx, "trylock", true)
	if lctx == nil {
		return ctx, false, err
	}
	return lctx, true, nil
}

func (r *ReentrantMutex) lock(ctx context.Context, op string, try bool) (context.Context, error) {
	if rh := r.held(ctx); rh != nil {
		rh.mu.Lock()
		defer rh.mu.Unlock()
		if state, err := rh.h.status(); state == stateLost {
			return nil, opError(op, r.key, err)
		}
		if rh.count <= 0 {
			return nil, opError(op, r.key, fmt.Errorf("context of an unlocked hold: %w", ErrNotHeld))
		}
		if rh.count >= MaxReentry {
			return nil, opError(op, r.key, ErrReentryLimit)
		}
		rh.count++
		return ctx, nil
	}
	h, err := acquire(ctx, lockOp{op: op, drv: r.drv, key: r.key, mode: driver.Exclusive, cfg: &r.cfg, try: try})
	if h == nil {
		return nil, err
	}
	rh := &reentrantHold{h: h, count: 1}
	var key any = reentryKey{h.eng, r.key}
	if !h.eng.shareable {
		key = reentryKey{r, r.key}
	}
	lctx, cancel := context.WithCancelCause(context.WithValue(ctx, key, rh))
	h.afterEnd(func(err error) {
		if err == nil {
			err = opError("unlock", r.key, ErrNotHeld)
		}
		cancel(err)
	})
	return lctx, nil
}

// Unlock undoes one Lock of the hold ctx carries; the last one releases
// the key. It returns an *Error wrapping ErrNotHeld if ctx carries no hold
// of r's key, or if it was unlocked as many times as it was locked, and
// wrapping ErrLost if the hold was lost (the count still goes down, so the
// usual deferred Unlock calls end it).
func (r *ReentrantMutex) Unlock(ctx context.Context) error {
	rh := r.held(ctx)
	if rh == nil {
		return opError("unlock", r.key, ErrNotHeld)
	}
	rh.mu.Lock()
	if rh.count <= 0 {
		rh.mu.Unlock()
		return opError("unlock", r.key, ErrNotHeld)
	}
	rh.count--
	last := rh.count == 0
	rh.mu.Unlock()
	if !last {
		if state, err := rh.h.status(); state == stateLost {
			return opError("unlock", r.key, err)
		}
		return nil
	}
	return rh.h.unlock(ctx, "unlock")
}

// Token returns the fencing token of the hold ctx carries, or 0.
func (r *ReentrantMutex) Token(ctx context.Context) Token {
	if rh := r.held(ctx); rh != nil {
		return rh.h.token()
	}
	return 0
}

// Count returns how many Unlock calls the hold ctx carries still needs, or
// 0 if ctx carries no live hold of r's key.
func (r *ReentrantMutex) Count(ctx context.Context) int {
	rh := r.held(ctx)
	if rh == nil {
		return 0
	}
	rh.mu.Lock()
	defer rh.mu.Unlock()
	return rh.count
}
