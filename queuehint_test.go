//go:build go1.25

package locker_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
)

// queueNotify is a memdriver.Driver whose Capabilities report no
// Acquire: the front-end, which uses only what the Capabilities report,
// runs its own wait loop with a queue and notifications, as on Redis.
type queueNotify struct{ *memdriver.Driver }

func (q queueNotify) Capabilities() driver.Capabilities {
	c := q.Driver.Capabilities()
	c.Acquire = false
	return c
}

// TestQueueHint: a handle whose last lock call waited in the backend's
// queue asks with its place in the queue from its next call's first
// attempt (no plain attempt refused first), and so stays behind the
// waiter that queued before it; a handle whose last lock did not wait
// asks without a place first.
func TestQueueHint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		ca := locker.New(queueNotify{b.Driver()}) // two processes
		cb := locker.New(queueNotify{b.Driver()})
		defer ca.Close(context.Background())
		defer cb.Close(context.Background())
		ma, mb := ca.Mutex("k"), cb.Mutex("k")

		ma.Lock()
		waitFor := func(m *locker.Mutex) chan struct{} {
			done := make(chan struct{})
			go func() { m.Lock(); close(done) }()
			time.Sleep(10 * time.Millisecond) // past the fairness threshold
			synctest.Wait()
			return done
		}
		got := waitFor(mb) // b waits in the queue: its handle remembers
		ma.Unlock()
		<-got
		before := b.Stats()
		got = waitFor(ma) // a did not wait last time: plain attempt first
		if s := b.Stats(); s.TryAcquire-before.TryAcquire != 1 {
			t.Errorf("a's lock after an uncontended one: %d plain attempts, want 1", s.TryAcquire-before.TryAcquire)
		}
		mb.Unlock()
		<-got

		before = b.Stats()
		got = waitFor(mb)
		s := b.Stats()
		if n := s.TryAcquire - before.TryAcquire; n != 0 {
			t.Errorf("b's lock after one that waited in the queue: %d plain attempts, want 0", n)
		}
		if n := s.TryAcquireQueued - before.TryAcquireQueued; n != 1 {
			t.Errorf("b's lock after one that waited in the queue: %d queued attempts, want 1", n)
		}
		if q := b.Queued("k"); len(q) != 1 {
			t.Errorf("queue = %v, want b's entry", q)
		}
		ma.Unlock()
		<-got
		mb.Unlock()

		// Long after, the hint is gone: a plain attempt first.
		time.Sleep(2 * time.Second)
		before = b.Stats()
		mb.Lock()
		if s := b.Stats(); s.TryAcquire-before.TryAcquire != 1 || s.TryAcquireQueued != before.TryAcquireQueued {
			t.Errorf("a lock long after: stats %+v -> %+v, want one plain attempt", before, s)
		}
		mb.Unlock()
	})
}
