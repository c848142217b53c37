package locker

import (
	"context"
	"sync"
	"time"

	"github.com/go-locker/locker/driver"
)

// handle is what Mutex and RWMutex share: the Client, key and options, the
// handle's own lock state (slot), and the holds taken through it.
//
// The slot makes a handle behave like a sync.Mutex or sync.RWMutex: a
// second Lock waits for the Unlock of the first, even when the first hold
// was lost meanwhile. The Client's line for the key, on the other hand, is
// given back as soon as a hold ends, so that other handles of the process
// lock a key that was lost at once.
//
// The handles of NewMutex and NewRWMutex have no Client: they lock through
// the default Client of their driver d, resolved at each lock call (see
// pinDefault), so that they share its line and watchdog with the other
// such handles of d while keeping nothing alive once unlocked.
type handle struct {
	_    noCopy
	c    *Client       // nil for a handle of the default Client of d
	d    driver.Driver // for a handle of the default Client
	dflt bool          // made by NewMutex or NewRWMutex
	key  string
	cfg  config
	slot slot

	mu    sync.Mutex
	holds []*Hold // taken through the handle, not yet released; most recent last
	last  *Hold   // the most recent hold, for Token
	// over is set when one of holds ended (by loss or Close) or the last
	// was released; done, made on demand by Done, is closed then.
	over bool
	done chan struct{}
	err  error // why the first of holds ended (loss or close), for Err
	// queuedAt is when the handle's last lock call was granted after
	// waiting with a place in the backend's queue, or zero when it was
	// granted otherwise (see queuedLately).
	queuedAt time.Time
}

func (hd *handle) init(c *Client, key string, opts []Option) {
	hd.c, hd.key, hd.cfg = c, key, c.config(opts)
}

// initDefault makes hd a handle of the default Client of d: only its own
// options apply, as the default Client has none.
func (hd *handle) initDefault(d driver.Driver, key string, opts []Option) {
	hd.d, hd.dflt, hd.key, hd.cfg = d, true, key, newConfig(opts)
}

// client returns hd's Client: for a handle of a default Client, the one
// in use now, or nil.
func (hd *handle) client() *Client {
	if hd.dflt {
		return peekDefault(hd.d)
	}
	return hd.c
}

// reportError hands err to hd's error handler (Client.reportError).
func (hd *handle) reportError(err error) { hd.client().reportError(&hd.cfg, err) }

// zeroCheck returns the error of op on a zero handle of kind k, or nil.
func (hd *handle) zeroCheck(op string, k kind) error {
	if hd.dflt {
		return nil
	}
	return zeroCheck(op, k, hd.c)
}

// closing returns the channel closed when hd's Client closes; nil for a
// handle of a default Client, which never closes.
func (hd *handle) closing() <-chan struct{} {
	if hd.dflt {
		return nil
	}
	return hd.c.ctx.Done()
}

// acquire runs o through hd's Client: for a handle of a default Client,
// the Client in use, pinned until the call returns nothing or its hold
// ends.
func (hd *handle) acquire(ctx context.Context, o lockOp) (*Hold, error) {
	if !hd.dflt {
		return hd.c.acquire(ctx, o)
	}
	return acquirePinned(ctx, pinDefault(hd.d), o)
}

// acquirePinned runs o through c, pinned by the caller: the pin goes with
// the hold, whose end unpins c (Hold.end), or is undone here when the call
// returns no hold. (A call that returns no hold ended none: only a closed
// Client ends the hold it made, and a default Client is never closed.)
func acquirePinned(ctx context.Context, c *Client, o lockOp) (*Hold, error) {
	h, err := c.acquire(ctx, o)
	if h == nil {
		c.unpin()
	}
	return h, err
}

// lock runs one lock call through the handle: it takes the handle's slot,
// then the key. It returns nil and no error when a try finds either taken.
// k is the handle's exported type, for the error of a zero value.
func (hd *handle) lock(ctx context.Context, k kind, op string, mode driver.Mode, try bool) (*Hold, error) {
	return hd.lockOp(ctx, k, lockOp{op: op, mode: mode, try: try})
}

// lockOp runs the lock call o through the handle, as lock does; the
// handle fills in o's key, options and handle.
func (hd *handle) lockOp(ctx context.Context, k kind, o lockOp) (*Hold, error) {
	if err := hd.zeroCheck(o.op, k); err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, opError(o.op, hd.key, ErrNilContext)
	}
	ok, err := hd.slot.acquire(ctx, o.mode, o.try, hd.closing())
	if !ok {
		if err != nil {
			return nil, opError(o.op, hd.key, err)
		}
		return nil, nil
	}
	o.key, o.cfg, o.hd = hd.key, &hd.cfg, hd
	h, err := hd.acquire(ctx, o)
	if h == nil {
		hd.slot.release(o.mode)
		return nil, err
	}
	return h, nil
}

// track records h, made by a lock call of the handle, before it can end.
func (hd *handle) track(h *Hold, queuedWait bool) {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	if len(hd.holds) == 0 {
		hd.done, hd.over, hd.err = nil, false, nil
	}
	hd.holds = append(hd.holds, h)
	hd.last = h
	switch {
	case queuedWait:
		hd.queuedAt = h.received
	case !hd.queuedAt.IsZero():
		hd.queuedAt = time.Time{}
	}
}

// queueHint is how long after a lock call that waited in the backend's
// queue the next lock call of the same handle asks with a place in the
// queue from its first attempt (see contention.queueAtOnce). A hint that
// no longer holds costs one call a subscription and a queued attempt on a
// free key, and then ends, since that call did not wait.
const queueHint = time.Second

// queuedLately reports whether the handle's last lock call was granted,
// less than queueHint ago, after waiting with a place in the backend's
// queue: the key was contended then.
func (hd *handle) queuedLately() bool {
	hd.mu.Lock()
	t := hd.queuedAt
	hd.mu.Unlock()
	return !t.IsZero() && time.Since(t) < queueHint
}

// ended records that h ended by loss or Close.
func (hd *handle) ended(h *Hold, err error) {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	if hd.err == nil {
		hd.err = err
	}
	hd.endLocked()
}

func (hd *handle) endLocked() {
	if !hd.over {
		hd.over = true
		if hd.done != nil {
			close(hd.done)
		}
	}
}

// released forgets h once its release has run, and gives back its slot.
func (hd *handle) released(h *Hold) {
	hd.untrack(h)
	hd.slot.release(h.lease.Mode)
}

// untrack forgets h.
func (hd *handle) untrack(h *Hold) {
	hd.mu.Lock()
	for i, x := range hd.holds {
		if x == h {
			n := copy(hd.holds[i:], hd.holds[i+1:])
			hd.holds[i+n] = nil
			hd.holds = hd.holds[:i+n]
			break
		}
	}
	if len(hd.holds) == 0 {
		hd.endLocked()
	} else if hd.last == h {
		hd.last = hd.holds[len(hd.holds)-1]
	}
	hd.mu.Unlock()
}

// claim finds a hold of the handle in mode m that no release has begun on,
// the most recent first, and claims it; nil if there is none.
func (hd *handle) claim(m driver.Mode) *Hold {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	for i := len(hd.holds) - 1; i >= 0; i-- {
		if h := hd.holds[i]; h.lease.Mode == m && h.claim() {
			return h
		}
	}
	return nil
}

// mustLock is the sync.Locker form of a lock call.
func (hd *handle) mustLock(_ *Hold, err error) {
	if err != nil {
		panic(err)
	}
}

// tryLock is the bool form of a try, bounded by the try timeout. Errors
// that only a change of the code can cure (a zero value, a bad key, TTL,
// option or driver, a missing capability) panic, as misuse does in package
// sync; every other failure, a closed backend client included, is a false
// result, and its error goes to the error handler (but for ErrClosed: the
// caller closed the Client).
func (hd *handle) tryLock(k kind, op string, mode driver.Mode) bool {
	if err := hd.zeroCheck(op, k); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hd.cfg.tryTimeout)
	defer cancel()
	h, err := hd.lock(ctx, k, op, mode, true)
	hd.client().tryFailed(&hd.cfg, err)
	return h != nil
}

// tryFailed deals with the error of a sync try (TryLock), which returns
// no error: err panics if only a change of the code cures it, and goes to
// the error handler otherwise, unless it is the caller's own Close.
func (c *Client) tryFailed(cfg *config, err error) {
	switch {
	case err == nil, isClosed(err):
	case isInputError(err):
		panic(err)
	default:
		c.reportError(cfg, err)
	}
}

// tryLockContext is the (bool, error) form of a try.
func (hd *handle) tryLockContext(ctx context.Context, k kind, op string, mode driver.Mode) (bool, error) {
	h, err := hd.lock(ctx, k, op, mode, true)
	return h != nil, err
}

// tryAcquire is the hold form of a try: a key held elsewhere, or through
// the handle, is an error wrapping ErrLocked.
func (hd *handle) tryAcquire(ctx context.Context, k kind, op string, mode driver.Mode) (*Hold, error) {
	h, err := hd.lock(ctx, k, op, mode, true)
	if h == nil && err == nil {
		err = opError(op, hd.key, ErrLocked)
	}
	return h, err
}

// unlock ends the handle's hold in mode m for an Unlock without error
// result: a missing hold is a run-time error, as in package sync; a lost or
// closed hold is not, and its error, like a backend error, goes to the
// error handler.
func (hd *handle) unlock(m driver.Mode, op, misuse string) {
	h := hd.claim(m)
	if h == nil {
		panic("locker: " + misuse)
	}
	if err := h.release(context.Background(), op); err != nil && !isClosed(err) {
		hd.reportError(err)
	}
}

// unlockContext ends the handle's hold in mode m for an Unlock with an
// error result.
func (hd *handle) unlockContext(ctx context.Context, m driver.Mode, op string) error {
	if ctx == nil {
		return opError(op, hd.key, ErrNilContext)
	}
	h := hd.claim(m)
	if h == nil {
		return opError(op, hd.key, ErrNotHeld)
	}
	return h.release(ctx, op)
}

func (hd *handle) token() Token {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	if hd.last == nil {
		return 0
	}
	return hd.last.Token()
}

func (hd *handle) doneChan() <-chan struct{} {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	if hd.over || len(hd.holds) == 0 {
		return closedChan
	}
	if hd.done == nil {
		hd.done = make(chan struct{})
	}
	return hd.done
}

func (hd *handle) errValue() error {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	if hd.err == nil {
		return nil
	}
	return opError("hold", hd.key, hd.err)
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// noCopy lets go vet's copylocks check flag copies of lock handles.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}

// A slot is a handle's own reader/writer lock, with contexts: writers
// exclude everyone, readers only writers, and a waiting writer keeps new
// readers out, as in sync.RWMutex.
type slot struct {
	mu      sync.Mutex
	writer  bool
	readers int
	writers int           // writers waiting
	wake    chan struct{} // closed when the slot changes; nil when nobody waits
}

// acquire takes the slot in mode m, waiting (unless try) until it is free,
// ctx is done or closing is closed. It returns false and nil when a try
// finds it taken.
func (s *slot) acquire(ctx context.Context, m driver.Mode, try bool, closing <-chan struct{}) (bool, error) {
	s.mu.Lock()
	if s.free(m, false) {
		s.take(m)
		s.mu.Unlock()
		return true, nil
	}
	if try {
		s.mu.Unlock()
		return false, nil
	}
	if m == driver.Exclusive {
		s.writers++
	}
	for {
		if s.wake == nil {
			s.wake = make(chan struct{})
		}
		wake := s.wake
		s.mu.Unlock()
		var err error
		select {
		case <-wake:
		case <-ctx.Done():
			err = ctx.Err()
		case <-closing:
			err = ErrClosed
		}
		s.mu.Lock()
		if err == nil && s.free(m, true) {
			s.take(m)
			if m == driver.Exclusive {
				s.writers--
			}
			s.mu.Unlock()
			return true, nil
		}
		if err != nil {
			if m == driver.Exclusive {
				s.writers--
				s.wakeLocked() // readers held back by this writer may go
			}
			s.mu.Unlock()
			return false, err
		}
	}
}

// free reports whether the slot can be taken in mode m; waiting tells a
// writer that counts itself among the waiting writers.
func (s *slot) free(m driver.Mode, waiting bool) bool {
	if m == driver.Shared {
		return !s.writer && s.writers == 0
	}
	return !s.writer && s.readers == 0 && (waiting || s.writers == 0)
}

func (s *slot) take(m driver.Mode) {
	if m == driver.Shared {
		s.readers++
	} else {
		s.writer = true
	}
}

// release gives the slot back in mode m.
func (s *slot) release(m driver.Mode) {
	s.mu.Lock()
	if m == driver.Shared {
		s.readers--
	} else {
		s.writer = false
	}
	s.wakeLocked()
	s.mu.Unlock()
}

func (s *slot) wakeLocked() {
	if s.wake != nil {
		close(s.wake)
		s.wake = nil
	}
}
