package locker

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/go-locker/locker/driver"
)

type holdState uint8

const (
	stateHeld holdState = iota
	stateLost
	stateClosed
	stateReleased
)

// A Hold is one grant of a key: from the moment the backend granted it
// until it is released, lost, or ended by Client.Close. Acquire methods
// return it; the sync-style Lock methods keep it in their handle.
//
// Token, Key and Mode stay readable after the hold ends. Done, Err and
// Context tell whether it still holds. A Hold is safe for concurrent use.
// Only lock calls make holds: a zero Hold holds nothing, its Done is
// closed, and Err, Refresh, Release and the cause of Context report an
// error wrapping ErrZeroValue.
type Hold struct {
	c        *Client
	g        *gate
	cfg      *config
	hd       *handle // the handle whose lock call made h, or nil
	lease    driver.Lease
	place    place // in the gate, given back when the hold ends
	ttl      time.Duration
	interval time.Duration
	margin   time.Duration
	fixed    bool      // no renewals: the hold ends at its TTL unless refreshed
	granted  time.Time // send time of the granted request, for the Observer
	received time.Time // when the grant was received (WithMinHold counts from it)

	// Watchdog state, guarded by c.wd.mu.
	sent     time.Time     // send time of the last confirmed acquire or renewal
	deadline time.Time     // sent + ttl - margin: after it the hold is lost
	due      time.Time     // next watchdog event
	index    int           // position in the watchdog heap, -1 when not in it
	inflight chan struct{} // closed when the outstanding renewal completes
	lastErr  error
	stopLoss func() // ends the driver's LossWatcher registration, if any

	// End state, guarded by mu.
	mu        sync.Mutex
	state     holdState
	err       error // why the hold ended: wraps ErrLost or ErrClosed
	releasing bool  // a release has begun
	// done, made on demand by Done (most holds are never asked), is
	// closed when the hold ends; doneClosed is set then, after the
	// Observer heard of the end.
	done       chan struct{}
	doneClosed bool
	ctx        context.Context
	cancel     context.CancelCauseFunc
	onEnd      []func(error)
}

func newHold(c *Client, g *gate, o *lockOp, l driver.Lease, sent time.Time) *Hold {
	cfg := o.cfg
	ttl := l.TTL
	if ttl <= 0 {
		ttl = cfg.ttl
	}
	if !l.Start.IsZero() && l.Start.Before(sent) {
		// The driver knew of the grant before our request: count from
		// when it began.
		sent = l.Start
	}
	l.Start = time.Time{}
	h := &Hold{
		c:        c,
		g:        g,
		cfg:      cfg,
		lease:    l,
		place:    o.place(),
		ttl:      ttl,
		interval: cfg.renewInterval(ttl),
		margin:   margin(ttl),
		fixed:    cfg.fixed,
		sent:     sent,
		granted:  sent,
		received: time.Now(),
		index:    -1,
	}
	h.lease.TTL = ttl
	h.deadline = sent.Add(ttl - h.margin)
	return h
}

// newOwner returns 128 random bits as 32 hex digits. Owners must be
// unique, not secret (whoever can reach the backend can delete a hold
// anyway): the bits come from math/rand/v2, whose generator the runtime
// seeds from the operating system's entropy, at a third of crypto/rand's
// cost on the hot path (35 ns against 97 ns per owner, hex included).
func newOwner() string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(b[8:], rand.Uint64())
	var s [32]byte
	hex.Encode(s[:], b[:])
	return string(s[:])
}

// Key returns the key h holds.
func (h *Hold) Key() string { return h.lease.Key }

// Token returns the fencing token of the grant. It stays readable after the
// hold ends.
func (h *Hold) Token() Token { return Token(h.lease.Token) }

// Shared reports whether h is a read hold (RWMutex.RAcquire, RLock).
func (h *Hold) Shared() bool { return h.lease.Mode == driver.Shared }

// Weight returns the number of permits h holds: its weight for a
// Semaphore hold, 0 for others.
func (h *Hold) Weight() int64 { return h.place.weight }

// Done returns a channel that is closed when the hold ends: by Release (or
// the Unlock of its handle), by loss, or by Client.Close.
func (h *Hold) Done() <-chan struct{} {
	if h.c == nil {
		return closedChan // a zero Hold
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.doneClosed {
		return closedChan
	}
	if h.done == nil {
		h.done = make(chan struct{})
	}
	return h.done
}

// Err returns nil while h is held and after a release, an *Error wrapping
// ErrLost after a loss (the backend reported the lease gone, no renewal was
// confirmed before the local deadline, or a fixed lease ran out), and an
// *Error wrapping ErrClosed after Client.Close ended it.
func (h *Hold) Err() error {
	if h.c == nil {
		return zeroError("hold", kindHold)
	}
	_, err := h.status()
	if err == nil {
		return nil
	}
	return opError("hold", h.lease.Key, err)
}

// Context returns a context that is cancelled when the hold ends, so that
// work done under the lock stops when the lock is gone. Its cause
// (context.Cause) is Err's error, or an error wrapping ErrNotHeld after a
// release. It carries no values and no deadline.
func (h *Hold) Context() context.Context {
	if h.c == nil {
		return zeroContext(zeroError("hold", kindHold))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx == nil {
		h.ctx, h.cancel = context.WithCancelCause(context.Background())
		if h.state != stateHeld {
			h.cancel(h.cause())
		}
	}
	return h.ctx
}

// cause is the cancellation cause of h's context. h.mu is held and h has
// ended.
func (h *Hold) cause() error {
	if h.err != nil {
		return opError("hold", h.lease.Key, h.err)
	}
	return opError("hold", h.lease.Key, fmt.Errorf("%w: released", ErrNotHeld))
}

// Refresh extends the lease by its TTL from now, as a renewal of the
// watchdog would: on a fixed lease (WithFixedLease) it is the only way to
// keep the hold past its TTL. It returns an *Error wrapping ErrNotHeld if h
// was released, wrapping ErrLost or ErrClosed if it ended so, and wrapping
// the backend's error otherwise; a backend that says the lease is gone ends
// the hold as lost.
func (h *Hold) Refresh(ctx context.Context) error {
	if h.c == nil {
		return zeroError("refresh", kindHold)
	}
	if ctx == nil {
		return opError("refresh", h.lease.Key, ErrNilContext)
	}
	if err := h.live(); err != nil {
		return opError("refresh", h.lease.Key, err)
	}
	sent := time.Now()
	_, err := h.c.drv.Refresh(ctx, h.lease)
	switch {
	case err == nil:
		h.c.wd.confirmed(h, sent)
		return nil
	case errors.Is(err, driver.ErrNotHeld):
		h.c.wd.lost(h, err)
		state, lerr := h.status()
		switch {
		case lerr != nil:
		case state == stateReleased:
			lerr = fmt.Errorf("%w: released", ErrNotHeld)
		default:
			// Another goroutine (the driver's loss report) is ending
			// the hold as lost and has not yet said why.
			lerr = fmt.Errorf("%w: %w", ErrLost, err)
		}
		return opError("refresh", h.lease.Key, lerr)
	}
	return opError("refresh", h.lease.Key, err)
}

// live returns nil while h is held and not being released, and the reason
// otherwise.
func (h *Hold) live() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.err != nil:
		return h.err
	case h.state != stateHeld || h.releasing:
		return fmt.Errorf("%w: released", ErrNotHeld)
	}
	return nil
}

// Release gives up the hold: no renewal is sent once it starts, and the
// lease is released on the backend. It returns nil when the lease was
// released; an *Error wrapping ErrLost or ErrClosed if the hold had ended
// so before; wrapping ErrNotHeld if it was already released; or wrapping
// the backend's error. After a transient error (no answer, a connection
// broken by a leader change) the release is retried in the background
// until it lands or the lease is gone, at most for the TTL; after a
// permanent one the lease expires on its own. In every case h no longer
// holds when Release returns, and the handle that acquired it is
// unlocked.
//
// Release returns by ctx's deadline. If the backend has not answered by
// then, or ctx is already done, the release goes on in the background on a
// fresh context bounded by the TTL; later lock calls for the key through
// the Client wait for it.
func (h *Hold) Release(ctx context.Context) error {
	if h.c == nil {
		return zeroError("release", kindHold)
	}
	if ctx == nil {
		return opError("release", h.lease.Key, ErrNilContext)
	}
	if !h.claim() {
		return opError("release", h.lease.Key, fmt.Errorf("%w: already released", ErrNotHeld))
	}
	return h.release(ctx, "release")
}

// claim marks h as being released, once: it reports false if a release
// has begun already.
func (h *Hold) claim() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.releasing {
		return false
	}
	h.releasing = true
	return true
}

// release ends a claimed hold for an unlock or a release operation op.
func (h *Hold) release(ctx context.Context, op string) error {
	defer func() {
		if h.hd != nil {
			h.hd.released(h)
		}
	}()
	c := h.c
	c.wd.remove(ctx, h)
	if state, err := h.status(); state != stateHeld {
		if state == stateLost || state == stateClosed {
			return opError(op, h.lease.Key, err)
		}
		return opError(op, h.lease.Key, ErrNotHeld)
	}
	if until, ok := h.keepLease(ctx, op); ok { // WithMinHold
		if h.end(stateReleased, nil) { // else Close ended h first, and keeps it
			c.releaseAt(h.lease, h.ttl, until, h.cfg)
		}
		return nil
	}
	if ctx.Err() != nil {
		// The caller has no time left: release in the background (the
		// cleanup keeps the key's line alive: it starts before the end).
		c.cleanupLater(h.g, h.lease, h.ttl, h.cfg)
		h.end(stateReleased, nil)
		return nil
	}
	rerr := c.releaseHedged(ctx, h.lease, h.ttl) // bounded as cleanupContext bounds
	switch {
	case rerr == nil:
		h.end(stateReleased, nil)
		return nil
	case errors.Is(rerr, driver.ErrNotHeld):
		h.end(stateLost, fmt.Errorf("%w: the lease was gone before the release: %w", ErrLost, rerr))
		_, err := h.status()
		return opError(op, h.lease.Key, err)
	case !driver.IsPermanent(rerr):
		// Outcome unknown: the caller's deadline cut the release short,
		// or the connection broke (a leader change). Retry it in the
		// background until it lands or the lease is gone: left alone,
		// the lease would block the key for up to a TTL after the
		// backend is back. The key's next lock call in this process
		// waits for the retries.
		c.cleanupLater(h.g, h.lease, h.ttl, h.cfg)
		h.end(stateReleased, nil)
		return opError(op, h.lease.Key, rerr)
	default:
		// A permanent error (a closed backend client): the lease expires
		// on its own if the release was not applied. The hold is over
		// for this process either way.
		h.end(stateReleased, nil)
		return opError(op, h.lease.Key, rerr)
	}
}

// end moves the hold to state s with reason err (nil for a release), once,
// and gives back its place in the Client's line for the key: a hold that
// ended lets the next lock call of the process proceed at once, whatever
// its handle does. It reports whether this call ended it.
func (h *Hold) end(s holdState, err error) bool {
	h.mu.Lock()
	if h.state != stateHeld {
		h.mu.Unlock()
		return false
	}
	h.state, h.err = s, err
	hooks := h.onEnd
	h.onEnd = nil
	h.mu.Unlock()
	// The Observer hears of the end before Done closes and Context is
	// cancelled, so that what it records is there for whoever waited
	// for them.
	h.observeEnd(err)
	h.mu.Lock()
	if h.cancel != nil {
		h.cancel(h.cause())
	}
	h.doneClosed = true
	if h.done != nil {
		close(h.done)
	}
	h.mu.Unlock()
	h.c.exit(h.g, h.place)
	h.c.unpin() // a default Client's hold pinned it (acquirePinned)
	if h.hd != nil && err != nil {
		h.hd.ended(h, err)
	}
	for _, f := range hooks {
		f(err)
	}
	if s == stateLost && h.cfg.onLost != nil {
		go h.cfg.onLost(opError("hold", h.lease.Key, err))
	}
	return true
}

// afterEnd arranges for f to run when the hold ends (at once if it has),
// with the reason it ended, nil for a release.
func (h *Hold) afterEnd(f func(error)) {
	h.mu.Lock()
	if h.state == stateHeld {
		h.onEnd = append(h.onEnd, f)
		h.mu.Unlock()
		return
	}
	err := h.err
	h.mu.Unlock()
	f(err)
}

func (h *Hold) status() (holdState, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state, h.err
}

// lose ends the hold as lost because of cause.
func (h *Hold) lose(cause error) {
	h.end(stateLost, fmt.Errorf("%w: %w", ErrLost, cause))
}

// cleanupBound is how long a release or cleanup without a deadline of its
// own may take: a lease outlives its holder by at most its TTL anyway, and
// not every client library times out on its own.
func cleanupBound(ttl time.Duration) time.Duration {
	return min(max(ttl, time.Second), 30*time.Second)
}

// cleanupContext returns the context for a release: ctx while it is alive
// and has a deadline (the caller's choice), ctx bounded by cleanupBound
// when it has none, and a fresh bounded context when ctx is done.
func cleanupContext(ctx context.Context, ttl time.Duration) (context.Context, context.CancelFunc) {
	if ctx != nil && ctx.Err() == nil {
		if _, ok := ctx.Deadline(); ok {
			return ctx, func() {}
		}
		return context.WithTimeout(ctx, cleanupBound(ttl))
	}
	return context.WithTimeout(context.Background(), cleanupBound(ttl))
}
