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
// context (or one derived from it) through a ReentrantMutex of the same
// Client and key enters the hold again instead of waiting, returns the
// same fencing token, and must be matched by one more Unlock. A Lock with a
// context that does not carry the hold is a new owner and waits, even in
// the same goroutine: two goroutines share a hold only when one was given
// the other's context. A handle of NewReentrantMutex recognises only its
// own holds, though it locks through its driver's default Client.
//
// The context Lock returns is canceled, with cause an error wrapping
// ErrLost, when the hold is lost, and with cause ErrNotHeld after the last
// Unlock, so work done under it stops when the lock is gone.
//
// Unlock with a context that carries no hold of the mutex, or one already
// unlocked as often as it was locked, is a run-time error, as unlocking an
// unlocked sync.Mutex is: it panics, so that a misplaced context cannot
// leave a hold renewed for ever. UnlockContext returns ErrNotHeld instead.
//
// ReentrantMutex has no sync forms (Lock(), TryLock() bool): Go has no
// goroutine identity, so a lock call without a context would have no
// owner to recognise. Its forms are those of the hold forms of Mutex with
// the context in place of the *Hold: Lock(ctx) (context.Context, error),
// TryLock(ctx) (context.Context, error) whose error wraps ErrLocked when
// another owner holds the key, Unlock(ctx), which panics on misuse as
// sync does, and UnlockContext(ctx) error.
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

// client returns r's Client: for a handle of NewReentrantMutex, the
// default Client of its driver in use now, or nil.
func (r *ReentrantMutex) client() *Client {
	if r.dflt {
		return peekDefault(r.d)
	}
	return r.c
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

// Lock locks r for the operation ctx belongs to, waiting if another owner
// holds the key. It returns the context to pass to nested Lock calls and
// to Unlock. On error nothing is held and the error is an *Error.
func (r *ReentrantMutex) Lock(ctx context.Context) (context.Context, error) {
	return r.lock(ctx, "lock", false)
}

// TryLock is Lock without waiting: when another owner holds the key it
// returns a nil context and an *Error wrapping ErrLocked, as
// Mutex.TryAcquire does. A context that carries the hold enters it again,
// as with Lock.
func (r *ReentrantMutex) TryLock(ctx context.Context) (context.Context, error) {
	lctx, err := r.lock(ctx, "trylock", true)
	if lctx == nil && err == nil {
		err = opError("trylock", r.key, ErrLocked)
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
			return nil, opError(op, r.key, fmt.Errorf("context of an unlocked hold: %w", ErrNotHeld))
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
			cancel(opError("unlock", r.key, ErrNotHeld))
			return
		}
		cancel(opError("hold", r.key, err))
	})
	return lctx, nil
}

// Unlock undoes one Lock of the hold ctx carries; the last one releases
// the key. It panics if ctx carries no hold of r's Client and key, or one
// unlocked as many times as it was locked. A lost hold is not misuse: its
// count goes down as usual and the loss goes to the error handler, as
// backend errors of the release do.
func (r *ReentrantMutex) Unlock(ctx context.Context) {
	if err := r.unlock(ctx); err != nil {
		if errors.Is(err, errMisuse) {
			panic("locker: unlock of unlocked ReentrantMutex")
		}
		if !isClosed(err) {
			r.client().reportError(&r.cfg, err)
		}
	}
}

// UnlockContext undoes one Lock of the hold ctx carries, as Unlock does,
// and returns an *Error wrapping ErrNotHeld where Unlock panics, and
// wrapping ErrLost or ErrClosed if the hold ended so (the count still goes
// down, so the usual deferred calls end it).
func (r *ReentrantMutex) UnlockContext(ctx context.Context) error {
	err := r.unlock(ctx)
	if errors.Is(err, errMisuse) {
		return opError("unlock", r.key, ErrNotHeld)
	}
	return err
}

// errMisuse marks an unlock that sync would call a run-time error.
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
			return opError("unlock", r.key, err)
		}
		return nil
	}
	if !rh.h.claim() {
		return nil // released through the Hold
	}
	return rh.h.release(ctx, "unlock")
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
