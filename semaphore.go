package locker

import (
	"context"
	"fmt"

	"github.com/go-locker/locker/driver"
)

// A Semaphore is a weighted semaphore of size permits shared by every
// process that uses key, the counterpart across processes of
// golang.org/x/sync/semaphore's Weighted. Each grant of permits is a Hold of its own, a lease that the
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
// Acquire and TryAcquire are the hold forms of Mutex with a weight: each
// returns its grant as a *Hold, for its token, Done and Context, and the
// hold's Release gives the permits back. A Semaphore has no sync forms
// and no Release(n) of its own, unlike x/sync's Weighted: each grant is a
// lease on the backend, and giving back n permits must say which lease
// ends, which only its Hold can.
//
// A Semaphore needs a driver whose Capabilities report Counted; otherwise its
// calls return an error wrapping errors.ErrUnsupported. It is safe for
// concurrent use. Make it with Client.Semaphore: the zero Semaphore fails
// with an error wrapping ErrZeroValue.
type Semaphore struct {
	_    noCopy
	c    *Client
	key  string
	size int64
	cfg  config
}

// Semaphore returns a Semaphore of size permits for key. It does no I/O: a
// bad key, size or option is reported by the first call.
func (c *Client) Semaphore(key string, size int64, opts ...Option) *Semaphore {
	return &Semaphore{c: c.orZero(), key: key, size: size, cfg: c.config(opts)}
}

// Key returns the semaphore's key.
func (s *Semaphore) Key() string { return s.key }

// Size returns the number of permits the semaphore was made with.
func (s *Semaphore) Size() int64 { return s.size }

// Acquire waits for w permits and returns them as one hold, or returns
// an error when ctx is done first (nothing is then left held), the Client
// is closed, or w is outside [1, size] (ErrInvalidWeight). Release the
// permits with the hold's Release.
func (s *Semaphore) Acquire(ctx context.Context, w int64) (*Hold, error) {
	return s.acquire(ctx, "acquire", w, false)
}

// TryAcquire makes one attempt for w permits, without waiting for other
// holders, and returns an *Error wrapping ErrLocked when they are not
// free.
func (s *Semaphore) TryAcquire(ctx context.Context, w int64) (*Hold, error) {
	h, err := s.acquire(ctx, "tryacquire", w, true)
	if h == nil && err == nil {
		return nil, opError("tryacquire", s.key, ErrLocked)
	}
	return h, err
}

// acquire checks the size and weight, then runs the lock call.
func (s *Semaphore) acquire(ctx context.Context, op string, w int64, try bool) (*Hold, error) {
	if err := zeroCheck(op, kindSemaphore, s.c); err != nil {
		return nil, err
	}
	switch {
	case s.size < 1:
		return nil, opError(op, s.key, fmt.Errorf("%w: semaphore size %d, want at least 1", ErrInvalidWeight, s.size))
	case w < 1 || w > s.size:
		return nil, opError(op, s.key, fmt.Errorf("%w: weight %d outside [1, %d]", ErrInvalidWeight, w, s.size))
	}
	return s.c.acquire(ctx, lockOp{op: op, key: s.key, mode: driver.Shared, limit: s.size, weight: w, cfg: &s.cfg, try: try})
}
