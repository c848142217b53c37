package recipebench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
)

// The shape of MultiLock's cell: MultiProcs clients (or processes), each
// on a driver of its own, with MultiGoroutines goroutines each,
// multi-lock the same MultiKeys keys.
const (
	MultiProcs      = 4
	MultiGoroutines = 2
	MultiKeys       = 4
)

// MultiLock runs procs × MultiGoroutines goroutines, MultiGoroutines on
// each of procs clients (a driver each, as separate processes would be),
// that multi-lock the same MultiKeys keys with the given TTL, over and
// over, on drivers made by mk, and reports acq/s and the longest time one
// lock call waited (max-wait-ms): the recipes' progress bound. base names
// the keys: processes that run it at once with the same base contend. One
// op is one multi-lock with its release; run with a fixed count, e.g.
// -benchtime 400x.
func MultiLock(b *testing.B, mk func(b *testing.B) driver.Driver, ttl time.Duration, procs int, base string) {
	keys := make([]string, MultiKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("recipebench/%s/%d", base, i)
	}
	var mls []*locker.MultiLock
	for range procs {
		c := locker.New(mk(b), locker.WithTTL(ttl))
		b.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = c.Close(ctx)
		})
		for range MultiGoroutines {
			mls = append(mls, c.MultiLock(keys))
		}
	}
	ctx := context.Background()
	var (
		tickets atomic.Int64
		holders atomic.Int32
		maxWait atomic.Int64
	)
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, ml := range mls {
		wg.Go(func() {
			for tickets.Add(1) <= int64(b.N) {
				t0 := time.Now()
				mh, err := ml.Acquire(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				w := int64(time.Since(t0))
				for m := maxWait.Load(); w > m && !maxWait.CompareAndSwap(m, w); m = maxWait.Load() {
				}
				if holders.Add(1) != 1 {
					b.Error("two holders of one MultiLock's keys at once")
				}
				spin(CriticalSection)
				holders.Add(-1)
				if err := mh.Release(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "acq/s")
	b.ReportMetric(float64(maxWait.Load())/1e6, "max-wait-ms")
}
