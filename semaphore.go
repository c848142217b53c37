package locker

import (
	"context"
	"fmt"
	"sync"

	"github.com/go-locker/locker/driver"
)

// A Semaphore is a weighted semaphore of size permits shared by every
// process that uses key: golang.org/x/sync/semaphore's Weighted, across
// processes. Each grant of permits is a Hold of its own, a lease that the
// Client's watchdog renews and that is lost the way a lock is (its Done
// closes and Err reports ErrLost), with a fencing token greater than those
// of every earlier grant of the key.
//
// Waiters are served first come, first served, without barging: a request
// for many permits is not overtaken by later requests for fewer, within the
// process and, on drivers with a wait queue (driver.Capabilities Queue or
// Acquire), across processes.
//
// Every user of key must make its Semaphore with the same size: a request
// with another size than the key's holders fails with an error wrapping
// ErrLimitMismatch rather than oversubscribing.
//
// Acquire, TryAcquire and Release have the shape of x/sync/semaphore: the
// Semaphore keeps the holds they take and Release gives back the most
// recent ones. AcquireHold and TryAcquireHold return the hold instead, for
// its token, Done and Context; release it with Hold.Release.
//
// A Semaphore needs a driver whose Capabilities report Counted; otherwise its
// calls return an error wrapping errors.ErrUnsupported. It is safe for
// concurrent use.
type Semaphore struct {
	_    noCopy
	c    *Client
	key  string
	size int64
	cfg  config

	mu    sync.Mutex
	holds []*Hold // taken by Acquire and TryAcquire; most recent last
}

// Semaphore returns a Semaphore of size permits for key. It does no I/O: a
// bad key, size or option is reported by the first call.
func (c *Client) Semaphore(key string, size int64, opts ...Option) *Semaphore {
	return &Semaphore{c: c, key: key, size: size, cfg: c.config(opts)}
}

// Key returns the semaphore's key.
func (s *Semaphore) Key() string { return s.key }

// Size returns the number of permits the semaphore was made with.
func (s *Semaphore) Size() int64 { return s.size }

// AcquireHold waits for w permits and returns them as one hold, or returns
// an error when ctx is done first (nothing is then left held), the Client
// is closed, or w is outside [1, size] (ErrInvalidWeight).
func (s *Semaphore) AcquireHold(ctx context.Context, w int64) (*Hold, error) {
	return s.acquire(ctx, "acquire", w, false)
}

// TryAcquireHold makes one attempt for w permits, without waiting for
// other holders, and returns an error wrapping ErrLocked when they are
// not free.
func (s *Semaphore) TryAcquireHold(ctx context.Context, w int64) (*Hold, error) {
	h, err := s.acquire(ctx, "tryacquire", w, true)
	if h == nil && err == nil {
		return nil, opError("tryacquire", s.key, ErrLocked)
	}
	return h, err
}

// Acquire waits for w permits, as AcquireHold does, and keeps their hold
// for Release.
func (s *Semaphore) Acquire(ctx context.Context, w int64) error {
	h, err := s.AcquireHold(ctx, w)
	if err != nil {
		return err
	}
	s.keep(h)
	return nil
}

// TryAcquire makes one attempt for w permits within the try timeout
// (WithTryTimeout), keeps their hold for Release, and reports whether it
// got them. Errors other than "not free" go to the error handler.
func (s *Semaphore) TryAcquire(w int64) bool {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.tryTimeout)
	defer cancel()
	h, err := s.acquire(ctx, "tryacquire", w, true)
	if err != nil {
		s.cfg.reportError(err)
		return false
	}
	if h == nil {
		return false
	}
	s.keep(h)
	return true
}

// Release gives back w permits taken by Acquire or TryAcquire: the most
// recent holds, whose weights must add up to w. A hold that was lost
// meanwhile is given back too, and its loss goes to the error handler, as
// for Mutex.Unlock. Release panics, as x/sync's does, when the semaphore
// keeps fewer than w permits or w would split a hold.
func (s *Semaphore) Release(w int64) {
	s.mu.Lock()
	i, left := len(s.holds), w
	for i > 0 && left > 0 {
		i--
		left -= s.holds[i].Weight()
	}
	if w < 1 || left != 0 {
		s.mu.Unlock()
		panic(fmt.Sprintf("locker: Semaphore.Release(%d) of %s: the most recent holds do not add up to that weight", w, driver.QuoteKey(s.key)))
	}
	gone := append([]*Hold(nil), s.holds[i:]...)
	clear(s.holds[i:])
	s.holds = s.holds[:i]
	s.mu.Unlock()
	for _, h := range gone {
		if !h.claim() {
			continue // released through the hold itself
		}
		if err := h.release(context.Background(), "release"); err != nil && !isClosed(err) {
			s.cfg.reportError(err)
		}
	}
}

func (s *Semaphore) keep(h *Hold) {
	s.mu.Lock()
	s.holds = append(s.holds, h)
	s.mu.Unlock()
}

// acquire checks the size and weight, then runs the lock call.
func (s *Semaphore) acquire(ctx context.Context, op string, w int64, try bool) (*Hold, error) {
	switch {
	case s.size < 1:
		return nil, opError(op, s.key, fmt.Errorf("%w: semaphore size %d, want at least 1", ErrInvalidWeight, s.size))
	case w < 1 || w > s.size:
		return nil, opError(op, s.key, fmt.Errorf("%w: weight %d outside [1, %d]", ErrInvalidWeight, w, s.size))
	}
	return s.c.acquire(ctx, lockOp{op: op, key: s.key, mode: driver.Shared, limit: s.size, weight: w, cfg: &s.cfg, try: try})
}
