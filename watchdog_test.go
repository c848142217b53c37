//go:build go1.25

package locker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
)

// countingDriver counts the renewals that reach the wrapped driver.
type countingDriver struct {
	*memdriver.Driver
	refreshes atomic.Int64 // leases renewed, one per lease
	batches   atomic.Int64 // round trips spent on renewals
}

func (c *countingDriver) Refresh(ctx context.Context, l driver.Lease) (driver.Lease, error) {
	c.refreshes.Add(1)
	c.batches.Add(1)
	return c.Driver.Refresh(ctx, l)
}

func (c *countingDriver) RefreshBatch(ctx context.Context, ls []driver.Lease) []error {
	c.refreshes.Add(int64(len(ls)))
	c.batches.Add(1)
	return c.Driver.RefreshBatch(ctx, ls)
}

func TestWatchdog_KeepsHoldAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		d := &countingDriver{Driver: b.Driver()}
		m := locker.NewMutex(d, "k", locker.WithTTL(time.Second))
		m.Lock()
		tok := m.Token()
		time.Sleep(10 * time.Second)
		if err := m.Err(); err != nil {
			t.Fatalf("hold lost while the backend was healthy: %v", err)
		}
		hs := b.Holders("k")
		if len(hs) != 1 || hs[0].Token != uint64(tok) {
			t.Fatalf("holders after 10 TTLs = %+v", hs)
		}
		// Renewals every TTL/3: about 30 in 10s.
		if n := d.refreshes.Load(); n < 27 || n > 33 {
			t.Fatalf("%d renewals in 10s with TTL 1s, want about 30", n)
		}
		m.Unlock()
	})
}

func TestWatchdog_NoRenewalAfterUnlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		d := &countingDriver{Driver: b.Driver()}
		// TTL MinTTL: a renewal every 26.7ms; 60 rounds, 1ms apart, cover
		// more than two renewal cycles.
		for i := range 60 {
			m := locker.NewMutex(d, "k", locker.WithTTL(locker.MinTTL))
			m.Lock()
			// Unlock at every phase of the renewal cycle, including while a
			// renewal is on its way.
			time.Sleep(time.Duration(i) * time.Millisecond)
			m.Unlock()
			n := d.refreshes.Load()
			time.Sleep(time.Second)
			if got := d.refreshes.Load(); got != n {
				t.Fatalf("round %d: %d renewals sent after Unlock returned", i, got-n)
			}
		}
	})
}

// TestWatchdog_LossBeforeExpiry blackholes the driver while a lock is held:
// the holder must learn of the loss before the backend lets anyone else in.
func TestWatchdog_LossBeforeExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		d := b.Driver()
		var lostErr atomic.Value
		opt, errs := quiet(t)
		ttl := time.Second
		m := locker.NewMutex(d, "k", locker.WithTTL(ttl), opt, locker.WithOnLost(func(err error) { lostErr.Store(err) }))
		m.Lock()
		acquired := time.Now()
		d.Block() // renewals hang from now on
		defer d.Unblock()

		other := locker.NewMutex(b.Driver(), "k", locker.WithTTL(ttl))
		otherGot := make(chan time.Time)
		go func() {
			other.Lock()
			otherGot <- time.Now()
		}()
		<-m.Done()
		lostAt := time.Now()
		t2 := <-otherGot
		if !lostAt.Before(t2) {
			t.Fatalf("loss signalled at %v, another holder got the key at %v", lostAt.Sub(acquired), t2.Sub(acquired))
		}
		if lostAt.Sub(acquired) > ttl {
			t.Fatalf("loss signalled %v after acquire, after the TTL", lostAt.Sub(acquired))
		}
		synctest.Wait()
		if err := m.Err(); !errors.Is(err, locker.ErrLost) {
			t.Fatalf("Err = %v, want ErrLost", err)
		}
		if err, _ := lostErr.Load().(error); !errors.Is(err, locker.ErrLost) {
			t.Fatalf("OnLost got %v", err)
		}
		if other.Token() <= m.Token() {
			t.Fatalf("successor token %d not above %d", other.Token(), m.Token())
		}
		_ = errs
		d.Unblock()
		err := m.UnlockContext(context.Background())
		checkErr(t, err, "unlock", "k", locker.ErrLost)
		if hs := b.Holders("k"); len(hs) != 1 || hs[0].Token != uint64(other.Token()) {
			t.Fatalf("unlock after loss touched the successor: holders %+v", hs)
		}
		other.Unlock()
	})
}

func TestWatchdog_RejectedRenewalEndsHoldAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		ttl := 3 * time.Second
		m := locker.NewMutex(b.Driver(), "k", locker.WithTTL(ttl))
		m.Lock()
		time.Sleep(100 * time.Millisecond)
		b.Expire("k") // an administrator deletes the lock
		expired := time.Now()
		<-m.Done()
		if d := time.Since(expired); d > ttl/3 {
			t.Fatalf("loss noticed %v after the backend dropped the hold, want within one renewal interval", d)
		}
		if !errors.Is(m.Err(), locker.ErrLost) || !errors.Is(m.Err(), locker.ErrNotHeld) {
			t.Fatalf("Err = %v, want ErrLost wrapping ErrNotHeld", m.Err())
		}
		// Unlock after a loss does not panic; it reports the loss.
		opt, errs := quiet(t)
		m2 := locker.NewMutex(b.Driver(), "k2", opt)
		m2.Lock()
		b.Expire("k2")
		<-m2.Done()
		m2.Unlock()
		if len(errs()) == 0 || !errors.Is(errs()[len(errs())-1], locker.ErrLost) {
			t.Fatalf("Unlock after loss reported %v", errs())
		}
		m.Unlock()
	})
}

func TestWatchdog_TransientFailuresAreReportedNotFatal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		d := b.Driver()
		opt, errs := quiet(t)
		m := locker.NewMutex(d, "k", locker.WithTTL(3*time.Second), opt)
		m.Lock()
		d.FailNext(1, nil) // the next renewal fails; the one after succeeds
		time.Sleep(10 * time.Second)
		if err := m.Err(); err != nil {
			t.Fatalf("one failed renewal lost the hold: %v", err)
		}
		if len(errs()) != 1 {
			t.Fatalf("error handler got %v, want the failed renewal", errs())
		}
		checkErr(t, errs()[0], "renew", "k", memdriver.ErrInjected)
		m.Unlock()
	})
}

// TestWatchdog_Batches holds many locks on one driver: renewals go out in
// batches, far fewer round trips than leases.
func TestWatchdog_Batches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		d := &countingDriver{Driver: b.Driver()}
		const n = 1000
		ttl := 3 * time.Second
		c := locker.New(d, locker.WithTTL(ttl))
		ms := make([]*locker.Mutex, n)
		for i := range ms {
			ms[i] = c.Mutex(fmt.Sprintf("k%d", i))
			ms[i].Lock()
			time.Sleep(ttl / n) // spread the acquisitions over a whole TTL
		}
		d.refreshes.Store(0)
		d.batches.Store(0)
		time.Sleep(10 * ttl)
		periods := int64(10 * 3)
		t.Logf("%d locks: %d leases renewed in %d round trips over %d periods", n, d.refreshes.Load(), d.batches.Load(), periods)
		if r := d.refreshes.Load(); r < n*periods*9/10 {
			t.Fatalf("%d leases renewed in %d periods, want about %d", r, periods, n*periods)
		}
		if perPeriod := d.batches.Load() / periods; perPeriod > n/100 {
			t.Fatalf("%d round trips per renewal period for %d locks, want at most %d", perPeriod, n, n/100)
		}
		for _, m := range ms {
			if m.Err() != nil {
				t.Fatal(m.Err())
			}
			m.Unlock()
		}
	})
}

func TestWatchdog_ManyHoldersConcurrently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		d := b.Driver()
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Go(func() {
				m := locker.NewMutex(d, fmt.Sprintf("k%d", i%5), locker.WithTTL(100*time.Millisecond))
				for range 10 {
					m.Lock()
					time.Sleep(70 * time.Millisecond)
					if m.Err() != nil {
						t.Error(m.Err())
					}
					m.Unlock()
				}
			})
		}
		wg.Wait()
	})
}
