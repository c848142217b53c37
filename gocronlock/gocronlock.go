package gocronlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/go-locker/locker"
)

// KeyPrefix starts the key of every job a Locker locks: a job named
// "report" locks "cron/report". Give jobs names (gocron.WithName) that are
// unique among the applications sharing a backend, or give each
// application's driver a prefix of its own.
const KeyPrefix = "cron/"

// A Locker is a gocron.Locker: at each tick, the replica that takes the
// job's key first runs the job, and the key stays held for at least the
// minimum hold after it was taken. A Locker is safe for concurrent use.
type Locker struct {
	c    *locker.Client
	opts []locker.Option
}

var _ gocron.Locker = (*Locker)(nil)

// NewLocker returns a Locker whose locks are taken through c, held for at
// least minHold (see "Clocks" in the package documentation), with opts
// applied after c's defaults (for instance locker.WithTTL: the lease must
// be longer than minHold, and bounds how long a replica that dies while
// running a job keeps the key). A bad minHold is reported by every Lock.
func NewLocker(c *locker.Client, minHold time.Duration, opts ...locker.Option) *Locker {
	return &Locker{c: c, opts: append(opts[:len(opts):len(opts)], locker.WithMinHold(minHold))}
}

// Lock takes the key of job (KeyPrefix+job) without waiting. It returns
// an error wrapping locker.ErrLocked when another replica holds it, in
// which case gocron skips the run, and any other error of the lock call
// the same way: a tick is never run twice for want of an answer from the
// backend.
func (l *Locker) Lock(ctx context.Context, job string) (gocron.Lock, error) {
	h, err := l.c.Mutex(KeyPrefix+job, l.opts...).TryAcquire(ctx)
	if err != nil {
		return nil, err
	}
	return lock{h}, nil
}

// lock is a gocron.Lock: a hold.
type lock struct{ h *locker.Hold }

// Unlock releases the hold, which keeps the key on the backend until its
// minimum hold has passed.
func (l lock) Unlock(ctx context.Context) error { return l.h.Release(ctx) }

// ErrNotLeader is what Elector.IsLeader returns on a replica that does not
// lead, so that gocron skips the run there.
var ErrNotLeader = errors.New("gocronlock: not the leader")

// An Elector is a gocron.Elector over a locker.LeaderLatch: the replica
// whose latch leads runs the jobs. An Elector is safe for concurrent use.
type Elector struct {
	latch  *locker.LeaderLatch
	settle time.Duration

	mu    sync.Mutex
	term  locker.Token // the leadership OnElected last reported
	since time.Time    // when it was elected
}

var _ gocron.Elector = (*Elector)(nil)

// NewElector starts a LeaderLatch on e with value (see
// locker.Election.Latch), which campaigns until ctx ends, and returns an
// Elector over it. Make e with the TTL you want (c.Election(key,
// locker.WithTTL(d))): a leader that dies is replaced within about a TTL.
//
// settle is how long a newly elected leader waits before it runs jobs:
// when a leader resigns (its process stops) right after running a tick,
// a successor whose clock is up to settle late does not run that tick
// again. Set it to the clock disagreement allowed between replicas (see
// "Clocks" in the package documentation), or 0 to run at once; a tick that
// falls within the settle time of an election runs nowhere.
func NewElector(ctx context.Context, e *locker.Election, value string, settle time.Duration) (*Elector, error) {
	el := &Elector{settle: settle}
	latch, err := e.Latch(ctx, value, locker.OnElected(el.elected))
	if err != nil {
		return nil, err
	}
	el.latch = latch
	return el, nil
}

func (el *Elector) elected(h *locker.Hold) {
	el.mu.Lock()
	el.term, el.since = h.Token(), time.Now()
	el.mu.Unlock()
}

// IsLeader returns nil when this replica leads, and has for the settle
// time, and an error wrapping ErrNotLeader otherwise. It never waits for
// the backend.
func (el *Elector) IsLeader(context.Context) error {
	h := el.latch.Leadership()
	if h == nil {
		return ErrNotLeader
	}
	if el.settle <= 0 {
		return nil
	}
	el.mu.Lock()
	settled := el.term == h.Token() && time.Since(el.since) >= el.settle
	el.mu.Unlock()
	if !settled {
		return ErrNotLeader
	}
	return nil
}

// Latch returns the LeaderLatch under el, for its Done, Err, Await and
// Leadership.
func (el *Elector) Latch() *locker.LeaderLatch { return el.latch }
