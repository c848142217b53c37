//go:build go1.25

package locker_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
)

// TestAcquirer_ContendedLockWaitsInAcquire checks that on a driver.Acquirer
// a contended Lock waits in the driver's Acquire, not in the front-end's
// own loop, and that waiters in separate processes are served in the
// order they started waiting.
func TestAcquirer_ContendedLockWaitsInAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		holder := locker.NewMutex(b.Driver(), "k")
		holder.Lock()
		before := b.Stats()

		const waiters = 4
		var (
			mu     sync.Mutex
			order  []int
			tokens []locker.Token
			wg     sync.WaitGroup
		)
		for i := range waiters {
			m := locker.NewMutex(b.Driver(), "k") // a process of its own
			wg.Go(func() {
				m.Lock()
				mu.Lock()
				order = append(order, i)
				tokens = append(tokens, m.Token())
				mu.Unlock()
				time.Sleep(time.Millisecond)
				m.Unlock()
			})
			synctest.Wait() // in the backend's queue before the next one starts
		}
		if q := b.Queued("k"); len(q) != waiters {
			t.Fatalf("queue = %v, want the %d waiters", q, waiters)
		}
		time.Sleep(time.Minute) // waiting costs no calls
		synctest.Wait()
		s := b.Stats()
		if got := s.Acquire - before.Acquire; got != waiters {
			t.Errorf("%d Acquire calls for %d waiting processes, want one each", got, waiters)
		}
		if got := s.TryAcquire - before.TryAcquire; got != waiters {
			t.Errorf("%d TryAcquire calls for %d waiting processes, want one each, before Acquire", got, waiters)
		}
		if s.TryAcquireQueued != before.TryAcquireQueued || s.Subscribe != before.Subscribe {
			t.Errorf("the front-end's own wait loop ran: stats %+v -> %+v", before, s)
		}

		first := holder.Token()
		holder.Unlock()
		wg.Wait()
		if !slices.Equal(order, []int{0, 1, 2, 3}) {
			t.Fatalf("waiters served in order %v, want the order they started waiting", order)
		}
		last := first
		for i, tok := range tokens {
			if tok <= last {
				t.Fatalf("waiter %d got token %d after %d", i, tok, last)
			}
			last = tok
		}
		// Each grant was confirmed with a Refresh that started its local
		// deadline.
		if got := b.Stats().Refresh - s.Refresh; got < waiters {
			t.Errorf("%d Refresh calls for %d grants by Acquire, want at least one each", got, waiters)
		}
		if hs, q := b.Holders("k"), b.Queued("k"); hs != nil || q != nil {
			t.Fatalf("left behind: holders %+v, queue %v", hs, q)
		}
	})
}

// TestAcquirer_LocalWaitersShareOneAcquire checks that within one process
// only the head of the key's line and the one after it wait in Acquire.
func TestAcquirer_LocalWaitersShareOneAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		c := locker.New(b.Driver())
		holder := locker.NewMutex(b.Driver(), "k") // another process
		holder.Lock()
		before := b.Stats()
		var wg sync.WaitGroup
		var n atomic.Int32
		for range 20 {
			wg.Go(func() {
				m := c.Mutex("k")
				m.Lock()
				n.Add(1)
				m.Unlock()
			})
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := b.Stats().Acquire - before.Acquire; got != 2 {
			t.Errorf("20 local waiters made %d Acquire calls, want 2", got)
		}
		if q := b.Queued("k"); len(q) != 2 {
			t.Errorf("backend queue %v, want the 2 waiters at the head of the local line", q)
		}
		holder.Unlock()
		wg.Wait()
		if n.Load() != 20 {
			t.Fatalf("%d of 20 waiters locked", n.Load())
		}
	})
}

// TestAcquirer_AcquireCancelLeavesNothing checks a LockContext that gives up
// while it waits in Acquire.
func TestAcquirer_AcquireCancelLeavesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		holder := locker.NewMutex(b.Driver(), "k")
		holder.Lock()
		m := locker.NewMutex(b.Driver(), "k")
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		err := m.LockContext(ctx)
		checkErr(t, err, "lock", "k", context.DeadlineExceeded)
		if waited := time.Since(start); waited != time.Second {
			t.Errorf("LockContext returned after %v, want when its context ended (1s)", waited)
		}
		if b.Stats().Acquire != 1 {
			t.Errorf("the wait did not go through Acquire: %+v", b.Stats())
		}
		if q := b.Queued("k"); q != nil {
			t.Fatalf("queue after the waiter gave up: %v", q)
		}
		holder.Unlock()
		if !m.TryLock() {
			t.Fatal("the key is not free once the holder left")
		}
		m.Unlock()
	})
}

// TestAcquirer_RevokedLeaseLostAtOnce checks that a hold whose lease the
// backend drops is declared lost as soon as the driver's LossWatcher
// reports it, long before the next renewal would have found out.
func TestAcquirer_RevokedLeaseLostAtOnce(t *testing.T) {
	for _, how := range []string{"revoke", "expire"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := memdriver.NewBackend()
				lostc := make(chan error, 1)
				m := locker.NewMutex(b.Driver(), "k", locker.WithTTL(30*time.Second),
					locker.WithOnLost(func(err error) { lostc <- err }))
				m.Lock()
				if got := b.Stats().WatchLoss; got != 1 {
					t.Fatalf("Stats.WatchLoss = %d after Lock, want 1", got)
				}
				time.Sleep(time.Second)
				refreshes := b.Stats().Refresh
				hs := b.Holders("k")
				if len(hs) != 1 {
					t.Fatalf("holders = %+v", hs)
				}
				dropped := time.Now()
				switch how {
				case "revoke":
					if !b.Revoke("k", hs[0].Owner) {
						t.Fatal("Revoke found no hold")
					}
				case "expire":
					b.Expire("k")
				}
				select {
				case <-m.Done():
				case <-time.After(10 * time.Millisecond):
					t.Fatal("Done still open 10ms after the backend dropped the lease (renewal every 10s)")
				}
				if d := time.Since(dropped); d != 0 {
					t.Errorf("loss declared %v after the backend reported it, want at once", d)
				}
				if got := b.Stats().Refresh; got != refreshes {
					t.Errorf("%d renewals before the loss was declared; want it learnt from the loss report", got-refreshes)
				}
				err := m.Err()
				if !errors.Is(err, locker.ErrLost) || !errors.Is(err, locker.ErrNotHeld) {
					t.Fatalf("Err = %v, want ErrLost wrapping ErrNotHeld", err)
				}
				if err := <-lostc; !errors.Is(err, locker.ErrLost) {
					t.Fatalf("OnLost got %v", err)
				}
				// The watchdog no longer renews the lost hold.
				time.Sleep(time.Minute)
				if got := b.Stats().Refresh; got != refreshes {
					t.Errorf("%d renewals of a lost hold", got-refreshes)
				}
				checkErr(t, m.UnlockContext(context.Background()), "unlock", "k", locker.ErrLost)

				// The key is free for others, with a greater token.
				other := locker.NewMutex(b.Driver(), "k")
				if !other.TryLock() {
					t.Fatal("the key is not free after the loss")
				}
				if other.Token() <= m.Token() {
					t.Fatalf("token %d after the lost hold's %d", other.Token(), m.Token())
				}
				other.Unlock()
			})
		})
	}
}

// TestAcquirer_NoLossOnUnlock checks that a normal Unlock is not reported as
// a loss, and that the watch ends with the hold.
func TestAcquirer_NoLossOnUnlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		var lost atomic.Int32
		m := locker.NewMutex(b.Driver(), "k", locker.WithTTL(time.Second),
			locker.WithOnLost(func(error) { lost.Add(1) }))
		for range 3 {
			m.Lock()
			time.Sleep(2 * time.Second) // renewed meanwhile
			m.Unlock()
			if err := m.Err(); err != nil {
				t.Fatalf("Err after Unlock = %v", err)
			}
		}
		b.Expire("k")
		time.Sleep(time.Minute)
		b.Holders("k")
		synctest.Wait()
		if n := lost.Load(); n != 0 {
			t.Fatalf("OnLost called %d times for holds that were unlocked", n)
		}
		if got := b.Stats().WatchLoss; got != 3 {
			t.Fatalf("Stats.WatchLoss = %d, want one per hold", got)
		}
	})
}

// wholeSeconds is memdriver with a TTLUnit of a second, as etcd's leases
// have.
type wholeSeconds struct{ *memdriver.Driver }

func (w wholeSeconds) Capabilities() driver.Capabilities {
	c := w.Driver.Capabilities()
	c.TTLUnit = time.Second
	return c
}

// TestAcquirer_TTLUnit checks that the front-end refuses a TTL that is not
// a whole number of the driver's TTLUnit, before any I/O, and accepts the
// others.
func TestAcquirer_TTLUnit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		d := wholeSeconds{b.Driver()}
		ctx := context.Background()
		const msg = "1.5s is not a whole number of the driver's TTL unit 1s: use 1s or 2s"
		want := func(op string, err error) {
			t.Helper()
			checkErr(t, err, op, "k", locker.ErrInvalidTTL)
			if !strings.Contains(err.Error(), msg) {
				t.Errorf("%s: %v; want the message %q", op, err, msg)
			}
		}
		m := locker.NewMutex(d, "k", locker.WithTTL(1500*time.Millisecond))
		want("lock", m.LockContext(ctx))
		_, err := m.TryLockContext(ctx)
		want("trylock", err)
		mustPanic(t, m.Lock)
		rw := locker.NewRWMutex(d, "k", locker.WithTTL(1500*time.Millisecond))
		want("rlock", rw.RLockContext(ctx))
		r := locker.NewReentrantMutex(d, "k", locker.WithTTL(1500*time.Millisecond))
		_, err = r.Enter(ctx)
		want("enter", err)
		if n := b.Calls(); n != 0 {
			t.Fatalf("a TTL the driver rejects reached the backend: %d calls", n)
		}

		// A TTL it accepts works.
		ok := locker.NewMutex(d, "k", locker.WithTTL(2*time.Second))
		if err := ok.LockContext(ctx); err != nil {
			t.Fatalf("LockContext with a whole-second TTL: %v", err)
		}
		if hs := b.Holders("k"); len(hs) != 1 || hs[0].TTL != 2*time.Second {
			t.Fatalf("holders = %+v", hs)
		}
		ok.Unlock()
	})
}

var _ driver.Describer = wholeSeconds{}
