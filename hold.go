package locker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-locker/locker/driver"
)

type holdState uint8

const (
	stateHeld holdState = iota
	stateLost
	stateUnlocked
)

// A hold is one grant of a key to one owner, from the moment the driver
// granted it until Unlock or loss. Every lock type is built from holds.
type hold struct {
	eng      *engine
	g        *gate
	cfg      *config
	op       string // the lock operation, for errors
	lease    driver.Lease
	ttl      time.Duration
	interval time.Duration
	margin   time.Duration
	done     chan struct{}

	// Watchdog state, guarded by eng.wd.mu.
	sent     time.Time     // send time of the last confirmed acquire or renewal
	deadline time.Time     // sent + ttl - margin: after it the hold is lost
	due      time.Time     // next watchdog event
	index    int           // position in the watchdog heap, -1 when not in it
	inflight chan struct{} // closed when the outstanding renewal completes
	lastErr  error
	stopLoss func() // ends the driver's LossWatcher registration, if any

	unlocking bool // claimed by an unlock; guarded by the owning handle's mutex

	endMu sync.Mutex
	state holdState
	err   error
	onEnd []func(error)
}

func newHold(e *engine, g *gate, cfg *config, op string, l driver.Lease, sent time.Time) *hold {
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
	h := &hold{
		eng:      e,
		g:        g,
		cfg:      cfg,
		op:       op,
		lease:    l,
		ttl:      ttl,
		interval: cfg.renewInterval(ttl),
		margin:   margin(ttl),
		done:     make(chan struct{}),
		sent:     sent,
		index:    -1,
	}
	h.lease.TTL = ttl
	h.deadline = sent.Add(ttl - h.margin)
	return h
}

// newOwner returns 128 random bits as 32 hex digits.
func newOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand documents it)
	return hex.EncodeToString(b[:])
}

// end moves the hold to state s with reason err, once. It reports whether
// this call ended it.
func (h *hold) end(s holdState, err error) bool {
	h.endMu.Lock()
	if h.state != stateHeld {
		h.endMu.Unlock()
		return false
	}
	h.state, h.err = s, err
	hooks := h.onEnd
	h.onEnd = nil
	h.endMu.Unlock()
	close(h.done)
	for _, f := range hooks {
		f(err)
	}
	if s == stateLost && h.cfg.onLost != nil {
		go h.cfg.onLost(err)
	}
	return true
}

// afterEnd arranges for f to run when the hold ends (at once if it has).
func (h *hold) afterEnd(f func(error)) {
	h.endMu.Lock()
	if h.state == stateHeld {
		h.onEnd = append(h.onEnd, f)
		h.endMu.Unlock()
		return
	}
	err := h.err
	h.endMu.Unlock()
	f(err)
}

func (h *hold) status() (holdState, error) {
	h.endMu.Lock()
	defer h.endMu.Unlock()
	return h.state, h.err
}

// lose ends the hold as lost because of cause.
func (h *hold) lose(cause error) {
	h.end(stateLost, opError("renew", h.lease.Key, fmt.Errorf("%w: %w", ErrLost, cause)))
}

// token returns the fencing token, which stays readable after the hold ends.
func (h *hold) token() Token { return Token(h.lease.Token) }

// unlock ends the hold: no renewal is sent after it starts the release, and
// the driver is asked to release the lease. The local gate place and engine
// reference are given back whatever happens. It returns an error wrapping
// ErrLost when the hold was lost before Unlock.
func (h *hold) unlock(ctx context.Context, op string) error {
	h.eng.wd.remove(h)
	rctx, cancel := cleanupContext(ctx, h.ttl)
	rerr := h.eng.drv.Release(rctx, h.lease)
	cancel()
	defer h.eng.unref()
	defer h.eng.exit(h.g, h.lease.Mode)

	if state, err := h.status(); state == stateLost {
		return opError(op, h.lease.Key, err)
	}
	switch {
	case rerr == nil:
		h.end(stateUnlocked, nil)
		return nil
	case errors.Is(rerr, driver.ErrNotHeld):
		err := opError(op, h.lease.Key, fmt.Errorf("%w: the lease was gone before unlock: %w", ErrLost, rerr))
		if !h.end(stateLost, err) {
			_, err = h.status()
		}
		return err
	default:
		// Outcome unknown: the lease expires on its own if the release was
		// not applied. The hold is over for this process either way.
		h.end(stateUnlocked, nil)
		return opError(op, h.lease.Key, rerr)
	}
}

// cleanupContext returns the context for a release or a cleanup: ctx while
// it is alive and has a deadline (the caller's choice), ctx bounded when it
// has none, and a fresh bounded context when ctx is done or nil, because a
// cleanup must run even after a cancellation, and must not hang on a
// backend that never answers (not every client library times out on its
// own): a lease outlives its holder by at most its TTL anyway.
func cleanupContext(ctx context.Context, ttl time.Duration) (context.Context, context.CancelFunc) {
	bound := min(max(ttl, time.Second), 30*time.Second)
	if ctx != nil && ctx.Err() == nil {
		if _, ok := ctx.Deadline(); ok {
			return ctx, func() {}
		}
		return context.WithTimeout(ctx, bound)
	}
	return context.WithTimeout(context.Background(), bound)
}
