package sqldriver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
)

// TestLockerQuick is a quick pass of package locker over each dialect, two
// processes (drivers with pools of their own) sharing keys: a Mutex
// excludes the other process and is handed over when unlocked, with a
// greater token; an RWMutex admits two readers and keeps a writer out
// until both have left; a lease left to expire frees its key; and calls
// through a stalled server return by their deadline. It is the part of the
// lockertest suite that -short keeps for the dialect whose suite it skips
// (see TestConformance), and runs in the full run too.
func TestLockerQuick(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		d1, d2 := b.driver(t, nil), b.driver(t, nil)
		c1 := locker.New(d1, locker.WithTTL(10*time.Second))
		c2 := locker.New(d2, locker.WithTTL(10*time.Second))
		for _, c := range []*locker.Client{c1, c2} {
			t.Cleanup(func() { _ = c.Close(context.Background()) })
		}

		t.Run("MutexHandover", func(t *testing.T) { quickHandover(t, c1, c2) })
		t.Run("RWMutex", func(t *testing.T) { quickRWMutex(t, c1, c2) })
		t.Run("Expiry", func(t *testing.T) { quickExpiry(t, d1, d2) })
		t.Run("Stalled", func(t *testing.T) { quickStalled(t, b) })
	})
}

// quickHandover is TestLockerQuick/MutexHandover: the Mutex of a key handed from one process to another waiting.
func quickHandover(t *testing.T, c1, c2 *locker.Client) {
	ctx := ctxT(t)
	key := uniqueKey(t, "m")
	m1, m2 := c1.Mutex(key), c2.Mutex(key)
	if err := m1.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	tok := m1.Token()
	if ok, err := m2.TryLockContext(ctx); ok || err != nil {
		t.Fatalf("TryLock by the other process while held = %v, %v; want false, nil", ok, err)
	}
	got := make(chan error, 1)
	go func() { got <- m2.LockContext(ctx) }()
	time.Sleep(100 * time.Millisecond) // m2 waits
	if err := m1.UnlockContext(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting process did not get the key within 10s of its release")
	}
	if m2.Token() <= tok {
		t.Errorf("token of the next holder %d, of the first %d; want greater", m2.Token(), tok)
	}
	if err := m2.UnlockContext(ctx); err != nil {
		t.Error(err)
	}
}

// quickRWMutex is TestLockerQuick/RWMutex: readers of two processes together, then a writer.
func quickRWMutex(t *testing.T, c1, c2 *locker.Client) {
	ctx := ctxT(t)
	key := uniqueKey(t, "rw")
	r1, r2, w := c1.RWMutex(key), c2.RWMutex(key), c2.RWMutex(key)
	if err := r1.RLockContext(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := r2.TryRLockContext(ctx); !ok || err != nil {
		t.Fatalf("second reader TryRLock = %v, %v; want true, nil", ok, err)
	}
	if ok, err := w.TryLockContext(ctx); ok || err != nil {
		t.Fatalf("writer TryLock with two readers = %v, %v; want false, nil", ok, err)
	}
	for _, r := range []*locker.RWMutex{r1, r2} {
		if err := r.RUnlockContext(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := w.TryLockContext(ctx); !ok || err != nil {
		t.Fatalf("writer TryLock once the readers left = %v, %v; want true, nil", ok, err)
	}
	if err := w.UnlockContext(ctx); err != nil {
		t.Error(err)
	}
}

// quickExpiry is TestLockerQuick/Expiry: a lease taken over by another process once it expired, not before.
func quickExpiry(t *testing.T, d1, d2 driver.Driver) {
	ctx := ctxT(t)
	key := uniqueKey(t, "e")
	const ttl = 300 * time.Millisecond
	start := time.Now() // before the grant, which starts the lease
	mustAcquire(t, d1, req(key, driver.Exclusive, ttl))
	for {
		l, err := d2.TryAcquire(ctx, req(key, driver.Exclusive, time.Minute))
		if err == nil {
			// 10ms for the rounding of the server's clock.
			if el := time.Since(start); el < ttl-10*time.Millisecond {
				t.Errorf("a %v lease was taken over after %v", ttl, el)
			}
			if err := d2.Release(ctx, l); err != nil {
				t.Error(err)
			}
			return
		}
		if !errors.Is(err, driver.ErrLocked) {
			t.Fatal(err)
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("a %v lease still holds its key after 5s", ttl)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// quickStalled is TestLockerQuick/Stalled: a LockContext that gives up by its deadline while the server is stalled.
func quickStalled(t *testing.T, b backend) {
	ctx := ctxT(t)
	d := b.driver(t, nil)
	c := locker.New(d, locker.WithTTL(10*time.Second), locker.WithErrorHandler(func(error) {}))
	key := uniqueKey(t, "s")
	resume := stall(t, d)
	lctx, cancel := context.WithTimeout(ctx, 600*time.Millisecond)
	start := time.Now()
	err := c.Mutex(key).LockContext(lctx)
	took := time.Since(start)
	cancel()
	resume()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("LockContext with the server stalled = %v; want an error wrapping context.DeadlineExceeded", err)
	}
	// Generous: TestStalledServer judges the driver's calls
	// closely; this checks that the front-end gives up too.
	if took > 2*time.Second {
		t.Errorf("LockContext with a 600ms deadline and the server stalled returned after %v", took)
	}
	if err := c.Close(ctx); err != nil {
		t.Errorf("Close once the server answers again: %v", err)
	}
}
