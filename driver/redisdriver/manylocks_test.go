package redisdriver_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/redis/go-redis/v9"
)

// TestManyLocks holds 10,000 locks in one process on a real redis-server
// and checks that the watchdog renews them in batches: at most one round
// trip per 100 locks per renewal period, and no hold lost.
func TestManyLocks(t *testing.T) {
	drivertest.Long(t, "holds 10,000 locks for several seconds")
	srv := realServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, PoolSize: 32})
	t.Cleanup(func() { _ = c.Close() })
	rt := &roundTrips{}
	c.AddHook(rt)
	d := newDriver(t, c)

	const n = 10000
	ttl := 6 * time.Second // renewed every 2s: room for a loaded CI machine under -race
	prefix := uniqueKey(t, "many")
	ms := make([]*locker.Mutex, n)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	lc := locker.New(d, locker.WithTTL(ttl)) // one Client: one watchdog batches the renewals
	for i := range ms {
		ms[i] = lc.Mutex(fmt.Sprintf("%s/%d", prefix, i))
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := ms[i].LockContext(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	perLock := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n

	start := rt.n.Load()
	const periods = 2
	time.Sleep(periods * ttl / 3)
	trips := rt.n.Load() - start
	t.Logf("%d locks held for %d renewal periods: %d round trips (%.1f per 100 locks per period); heap %d bytes per held lock (handle, hold, driver and client state)",
		n, periods, trips, float64(trips)*100/n/periods, perLock)
	if trips > n/100*periods {
		t.Errorf("%d round trips for %d renewal periods of %d locks, want at most %d", trips, periods, n, n/100*periods)
	}
	for _, m := range ms {
		if err := m.Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range ms {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := m.UnlockContext(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}
