package locker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/go-locker/locker/driver"
)

// A MultiLock locks several keys as one: all of them or none, as Curator's
// InterProcessMultiLock and Redisson's MultiLock do.
//
// It takes the keys one by one in ascending byte order, whatever the order
// they were given in, so that processes asking for overlapping sets never
// deadlock: each waits only for a key greater than every key it holds. If
// one key cannot be had (the context ends, the Client closes, a try finds
// it taken) the keys already taken are released and the call fails.
//
// A grant is one *MultiHold: a hold per key, each with its own fencing
// token and renewed by the Client's watchdog, and one Done that closes as
// soon as any part ends.
//
// A MultiLock has Mutex's three forms: Lock, Unlock and TryLock (a
// sync.Locker); LockContext, UnlockContext and TryLockContext; and Acquire
// and TryAcquire, whose hold is the *MultiHold. A MultiLock is safe for
// concurrent use and must not be copied after first use. Make it with
// Client.MultiLock: the zero MultiLock fails with an error wrapping
// ErrZeroValue.
type MultiLock struct {
	_    noCopy
	c    *Client
	keys []string // sorted, distinct
	cfg  config
	slot slot

	mu   sync.Mutex
	held *MultiHold // taken by Lock, until Unlock
}

// MultiLock returns a MultiLock for keys. Repeated keys count once; opts
// apply to the hold of every key, after the Client's defaults. It does no
// I/O: a bad key, no key at all, or a bad option is reported by the first
// lock call.
func (c *Client) MultiLock(keys []string, opts ...Option) *MultiLock {
	ks := slices.Clone(keys)
	slices.Sort(ks)
	return &MultiLock{c: c.orZero(), keys: slices.Compact(ks), cfg: c.config(opts)}
}

// Keys returns the keys of m, sorted, in the order they are locked.
func (m *MultiLock) Keys() []string { return slices.Clone(m.keys) }

// Acquire locks every key of m, waiting for each, and returns the holds as
// one MultiHold, or an error naming the key it could not lock; the keys it
// had taken are then released.
func (m *MultiLock) Acquire(ctx context.Context) (*MultiHold, error) {
	return m.acquire(ctx, "multilock", false)
}

// TryAcquire locks every key of m if none is held elsewhere, making one
// attempt per key, and returns an error wrapping ErrLocked otherwise; the
// keys it had taken are then released.
func (m *MultiLock) TryAcquire(ctx context.Context) (*MultiHold, error) {
	return m.acquire(ctx, "trymultilock", true)
}

// Lock locks every key of m, waiting first for m's previous Lock to be
// unlocked, as sync.Mutex does. It panics with the error that stopped it,
// as Mutex.Lock does: a zero MultiLock, an invalid key, a permanent
// backend error or a closed Client.
func (m *MultiLock) Lock() {
	if err := m.LockContext(context.Background()); err != nil {
		panic(err)
	}
}

// LockContext is Lock that returns the error instead of panicking, and
// gives up when ctx ends.
func (m *MultiLock) LockContext(ctx context.Context) error {
	_, err := m.lock(ctx, "multilock", false)
	return err
}

// TryLock tries once to lock every key of m, without waiting, and reports
// whether it did, as Mutex.TryLock does: it gives up after the try timeout
// (WithTryTimeout), reports failures other than a taken key to the error
// handler, and panics only on a zero MultiLock or an invalid key or
// option.
func (m *MultiLock) TryLock() bool {
	const op = "trymultilock"
	if err := zeroCheck(op, kindMultiLock, m.c); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.tryTimeout)
	defer cancel()
	ok, err := m.lock(ctx, op, true)
	m.c.tryFailed(&m.cfg, err)
	return ok
}

// TryLockContext tries once to lock every key of m, without waiting. It
// reports false and no error when a key is held elsewhere (or m is
// locked), and false and the error when an attempt failed.
func (m *MultiLock) TryLockContext(ctx context.Context) (bool, error) {
	return m.lock(ctx, "trymultilock", true)
}

// lock takes m's slot, then every key, for Lock. A try reports false and
// no error when the slot or a key is taken.
func (m *MultiLock) lock(ctx context.Context, op string, try bool) (bool, error) {
	if err := zeroCheck(op, kindMultiLock, m.c); err != nil {
		return false, err
	}
	if ctx == nil {
		return false, opError(op, m.first(), ErrNilContext)
	}
	ok, err := m.slot.acquire(ctx, driver.Exclusive, try, m.c.ctx.Done())
	if !ok {
		if err != nil {
			return false, opError(op, m.first(), err)
		}
		return false, nil
	}
	mh, err := m.acquire(ctx, op, try)
	if mh == nil {
		m.slot.release(driver.Exclusive)
		if errors.Is(err, ErrLocked) && try {
			return false, nil
		}
		return false, err
	}
	m.mu.Lock()
	m.held = mh
	m.mu.Unlock()
	return true, nil
}

// Unlock releases the keys that Lock took. It panics if m is not locked;
// a loss or a backend error goes to the error handler, as for
// Mutex.Unlock.
func (m *MultiLock) Unlock() {
	mh := m.take()
	if mh == nil {
		panic("locker: unlock of unlocked MultiLock")
	}
	if err := mh.Release(context.Background()); err != nil && !isClosed(err) {
		m.c.reportError(&m.cfg, err)
	}
}

// UnlockContext is Unlock that returns the error, and ErrNotHeld when m is
// not locked.
func (m *MultiLock) UnlockContext(ctx context.Context) error {
	if ctx == nil {
		return opError("unlock", m.first(), ErrNilContext)
	}
	mh := m.take()
	if mh == nil {
		return opError("unlock", m.first(), ErrNotHeld)
	}
	return mh.Release(ctx)
}

// take removes the MultiHold of Lock and gives back the slot.
func (m *MultiLock) take() *MultiHold {
	m.mu.Lock()
	mh := m.held
	m.held = nil
	m.mu.Unlock()
	if mh != nil {
		m.slot.release(driver.Exclusive)
	}
	return mh
}

// first names m in errors that concern no key in particular.
func (m *MultiLock) first() string {
	if len(m.keys) == 0 {
		return ""
	}
	return m.keys[0]
}

func (m *MultiLock) acquire(ctx context.Context, op string, try bool) (*MultiHold, error) {
	if err := zeroCheck(op, kindMultiLock, m.c); err != nil {
		return nil, err
	}
	if len(m.keys) == 0 {
		return nil, opError(op, "", fmt.Errorf("%w: a MultiLock needs at least one key", ErrInvalidKey))
	}
	mh := &MultiHold{holds: make([]*Hold, 0, len(m.keys))}
	for _, key := range m.keys {
		h, err := m.c.acquire(ctx, lockOp{op: op, key: key, mode: driver.Exclusive, cfg: &m.cfg, try: try})
		if h == nil && err == nil {
			err = opError(op, key, ErrLocked)
		}
		if err != nil {
			mh.abandon(ctx)
			return nil, err
		}
		mh.holds = append(mh.holds, h)
	}
	mh.watch()
	return mh, nil
}

// A MultiHold is the grant of a MultiLock: one Hold per key. Release it
// with Release; it ends, and Done closes, as soon as any part ends. A zero
// MultiHold holds nothing: Done is closed, and Err and the cause of
// Context wrap ErrZeroValue.
type MultiHold struct {
	holds []*Hold // in key order

	mu     sync.Mutex
	err    error // the first part's loss or close
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// Holds returns the parts of mh, in key order.
func (mh *MultiHold) Holds() []*Hold { return slices.Clone(mh.holds) }

// Token returns the fencing token of key's part, or 0 when key is not one
// of mh's keys.
func (mh *MultiHold) Token(key string) Token {
	for _, h := range mh.holds {
		if h.Key() == key {
			return h.Token()
		}
	}
	return 0
}

// Done returns a channel that is closed as soon as any part of mh ends:
// released, lost, or ended by Client.Close.
func (mh *MultiHold) Done() <-chan struct{} { return mh.Context().Done() }

// Context returns a context that is cancelled when Done closes, with the
// ending part's reason as its cause.
func (mh *MultiHold) Context() context.Context {
	if mh.ctx == nil {
		return zeroContext(zeroError("hold", kindMultiHold))
	}
	return mh.ctx
}

// Err returns nil while every part holds and after a release, and
// otherwise the error of the first part that was lost or closed.
func (mh *MultiHold) Err() error {
	if mh.ctx == nil {
		return zeroError("hold", kindMultiHold)
	}
	mh.mu.Lock()
	defer mh.mu.Unlock()
	return mh.err
}

// Release releases every part, concurrently, and returns their errors
// joined: nil when all were released; errors wrapping ErrLost for parts
// lost before. Every part is ended when it returns.
func (mh *MultiHold) Release(ctx context.Context) error {
	if ctx == nil {
		return opError("release", "", ErrNilContext)
	}
	errs := make([]error, len(mh.holds))
	var wg sync.WaitGroup
	for i, h := range mh.holds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = h.Release(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// watch ties mh's context to its parts' ends.
func (mh *MultiHold) watch() {
	mh.ctx, mh.cancel = context.WithCancelCause(context.Background())
	for _, h := range mh.holds {
		h.afterEnd(func(error) {
			// The part's own Err and Context cause, so that a MultiHold
			// says what its part says.
			mh.mu.Lock()
			if mh.err == nil {
				mh.err = h.Err()
			}
			mh.mu.Unlock()
			mh.cancel(context.Cause(h.Context()))
		})
	}
}

// abandon releases the parts taken by a call that failed.
func (mh *MultiHold) abandon(ctx context.Context) {
	for _, h := range mh.holds {
		_ = h.Release(ctx) // a done ctx moves the release to the background
	}
}
