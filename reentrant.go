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
// enter again while it holds it.
//
// Go has no goroutine identity, so the owner is explicit: it travels in the
// context. Enter returns a context that carries the hold; an Enter with that
// context (or one derived from it) through a ReentrantMutex of the same
// Client and key enters the hold again instead of waiting, returns the
// same fencing token, and must be matched by one more Leave. An Enter with
// a context that does not carry the hold is a new owner and waits, even in
// the same goroutine: two goroutines share a hold only when one was given
// the other's context. A handle of NewReentrantMutex recognises only its
// own holds, though it locks through its driver's default Client.
//
// The context Enter returns is canceled, with cause an error wrapping
// ErrLost, when the hold is lost, and with cause ErrNotHeld after the last
// Leave, so work done under it stops when the lock is gone.
//
// Its methods are not named Lock and Unlock: their context is not only a
// deadline, as in Mutex.LockContext, but the owner, and Enter returns a
// new one, so a ReentrantMutex cannot be a sync.Locker nor take the forms
// of the other lock types (see "Forms" in the package documentation).
// Leave with a context that carries no hold of the mutex, or one already
// left as often as it was entered, is a run-time error, as unlocking an
// unlocked sync.Mutex is: it panics, so that a misplaced context cannot
// leave a hold renewed for ever.
//
// Make a ReentrantMutex with Client.ReentrantMutex or NewReentrantMutex:
// the zero ReentrantMutex fails with an error wrapping ErrZeroValue. A
// ReentrantMutex must not be copied after first use.
type ReentrantMutex struct {
	_    noCopy
	c    *Client       // nil for a handle of NewReentrantMutex
	d    driver.Driver // NewReentrantMutex's: locks through d's default Client
	dflt bool          // made by NewReentrantMutex
	key  string
	cfg  config
}

// NewReentrantMutex returns a ReentrantMutex for key on d, as NewMutex
// does: it locks through the default Client of d, which it shares with the
// other handles of NewMutex and its kin over d (one line per key, batched
// renewals), and its options apply to it alone. Its holds are its own: a
// context returned by it enters its holds only.
func NewReentrantMutex(d driver.Driver, key string, opts ...Option) *ReentrantMutex {
	return &ReentrantMutex{d: d, dflt: true, key: key, cfg: newConfig(opts)}
}

// zeroCheck returns the error of op on a zero ReentrantMutex, or nil.
func (r *ReentrantMutex) zeroCheck(op string) error {
	if r.dflt {
		return nil // a nil driver is reported by the call's checks
	}
	return zeroCheck(op, kindReentrant, r.c)
}

// owner is what identifies r's holds in a context: its Client, or the
// handle itself for a handle of a default Client.
func (r *ReentrantMutex) owner() any {
	if r.dflt {
		return r
	}
	return r.c
}

// Key returns the key r locks.
func (r *ReentrantMutex) Key() string { return r.key }

// reentrantHold is a hold with its entry count, stored in contexts.
type reentrantHold struct {
	h     *Hold
	mu    sync.Mutex
	count int
}

// reentryKey identifies a hold in a context: the Client (or the handle,
// see owner) and the key.
type reentryKey struct {
	owner any
	key   string
}

func (r *ReentrantMutex) held(ctx context.Context) *reentrantHold {
	if ctx == nil {
		return nil
	}
	rh, _ := ctx.Value(reentryKey{r.owner(), r.key}).(*reentrantHold)
	return rh
}

// Enter locks r for the operation ctx belongs to: if ctx carries a hold
// of r it enters it again at once, and otherwise it waits until the key is
// free, ctx is done or a permanent error occurs, as Mutex.LockContext
// does. It returns the context that carries the hold, to pass to nested
// Enter calls and to Leave. On error nothing is held and the error is an
// *Error.
func (r *ReentrantMutex) Enter(ctx context.Context) (context.Context, error) {
	return r.lock(ctx, "enter", false)
}

// TryEnter is Enter without waiting: when another owner holds the key it
// returns a nil context and an *Error wrapping ErrLocked, as
// Mutex.TryAcquire does. A context that carries the hold enters it again,
// as with Enter.
func (r *ReentrantMutex) TryEnter(ctx context.Context) (context.Context, error) {
	lctx, err := r.lock(ctx, "tryenter", true)
	if lctx == nil && err == nil {
		err = opError("tryenter", r.key, ErrLocked)
	}
	return lctx, err
}

// lock returns nil and no error when a try finds the key taken.
func (r *ReentrantMutex) lock(ctx context.Context, op string, try bool) (context.Context, error) {
	if err := r.zeroCheck(op); err != nil {
		return nil, err
	}
	if rh := r.held(ctx); rh != nil {
		rh.mu.Lock()
		defer rh.mu.Unlock()
		if _, err := rh.h.status(); err != nil {
			return nil, opError(op, r.key, err)
		}
		if rh.count <= 0 {
			return nil, opError(op, r.key, fmt.Errorf("context of a hold left as often as it was entered: %w", ErrNotHeld))
		}
		if rh.count >= MaxReentry {
			return nil, opError(op, r.key, ErrReentryLimit)
		}
		rh.count++
		return ctx, nil
	}
	if ctx == nil {
		return nil, opError(op, r.key, ErrNilContext)
	}
	o := lockOp{op: op, key: r.key, mode: driver.Exclusive, cfg: &r.cfg, try: try}
	var h *Hold
	var err error
	if r.dflt {
		h, err = acquirePinned(ctx, pinDefault(r.d), o)
	} else {
		h, err = r.c.acquire(ctx, o)
	}
	if h == nil {
		return nil, err
	}
	rh := &reentrantHold{h: h, count: 1}
	lctx, cancel := context.WithCancelCause(context.WithValue(ctx, reentryKey{r.owner(), r.key}, rh))
	h.afterEnd(func(err error) {
		if err == nil {
			cancel(opError("leave", r.key, ErrNotHeld))
			return
		}
		cancel(opError("hold", r.key, err))
	})
	return lctx, nil
}

// Leave undoes one Enter of the hold ctx carries; the last one releases
// the key, within ctx's deadline. It returns an *Error wrapping ErrLost or
// ErrClosed if the hold ended so, or the backend's error of the release;
// the count goes down all the same, so the usual deferred calls end the
// hold. It panics if ctx carries no hold of r's Client and key, or one
// left as many times as it was entered (see ReentrantMutex). On a zero
// ReentrantMutex it returns an error wrapping ErrZeroValue.
func (r *ReentrantMutex) Leave(ctx context.Context) error {
	if err := r.zeroCheck("leave"); err != nil {
		return err
	}
	err := r.unlock(ctx)
	if errors.Is(err, errMisuse) {
		panic("locker: leave of a ReentrantMutex not entered")
	}
	return err
}

// errMisuse marks a Leave that sync would call a run-time error.
var errMisuse = errors.New("misuse")

func (r *ReentrantMutex) unlock(ctx context.Context) error {
	rh := r.held(ctx)
	if rh == nil {
		return errMisuse
	}
	rh.mu.Lock()
	if rh.count <= 0 {
		rh.mu.Unlock()
		return errMisuse
	}
	rh.count--
	last := rh.count == 0
	rh.mu.Unlock()
	if !last {
		if _, err := rh.h.status(); err != nil {
			return opError("leave", r.key, err)
		}
		return nil
	}
	if !rh.h.claim() {
		return nil // released through the Hold
	}
	return rh.h.release(ctx, "leave")
}

// Hold returns the hold ctx carries for r, or nil.
func (r *ReentrantMutex) Hold(ctx context.Context) *Hold {
	if rh := r.held(ctx); rh != nil {
		return rh.h
	}
	return nil
}

// Token returns the fencing token of the hold ctx carries, or 0.
func (r *ReentrantMutex) Token(ctx context.Context) Token {
	if rh := r.held(ctx); rh != nil {
		return rh.h.Token()
	}
	return 0
}

// Count returns how many Leave calls the hold ctx carries still needs, or
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
