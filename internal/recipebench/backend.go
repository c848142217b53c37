package recipebench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
)

// Contenders and Keys are the shapes of Backend's two cells.
const (
	// Contenders is how many clients, each on a driver of its own (as
	// separate processes would be), contend for one key in OneKey.
	Contenders = 8
	// Keys is how many goroutines of one client lock keys of their own in
	// DistinctKeys.
	Keys = 16
	// CriticalSection is how long OneKey's holders work under the lock.
	CriticalSection = 100 * time.Microsecond
)

// Backend runs the sub-benchmarks a choice of backend rests on, with
// package locker's Mutex on drivers made by mk:
//
//   - OneKey: Contenders clients, each on its own driver, lock one key
//     over and over, work CriticalSection under it and unlock. It reports
//     acq/s, the longest wait (max-wait-ms) and fairness, the most
//     acquisitions of a client divided by the fewest.
//   - DistinctKeys: Keys goroutines of one client lock and unlock keys of
//     their own. It reports pairs/s.
//
// One op is one acquisition (with its release); b.N is shared among the
// goroutines. Run with a fixed count, e.g. -benchtime 400x.
func Backend(b *testing.B, mk func(b *testing.B) driver.Driver) {
	b.Run(fmt.Sprintf("OneKey/%d", Contenders), func(b *testing.B) { oneKey(b, mk) })
	b.Run(fmt.Sprintf("DistinctKeys/%d", Keys), func(b *testing.B) { distinctKeys(b, mk(b)) })
}

// oneKey is the contended cell of Backend.
func oneKey(b *testing.B, mk func(b *testing.B) driver.Driver) {
	k := key(b)
	ms := make([]*locker.Mutex, Contenders)
	for i := range ms {
		ms[i] = client(b, mk(b)).Mutex(k)
	}
	acquire := make([]func(context.Context) (releaser, error), len(ms))
	for i, m := range ms {
		acquire[i] = func(ctx context.Context) (releaser, error) { return m.Acquire(ctx) }
	}
	counts := contend(b, "one Mutex", acquire)
	lo, hi := slices.Min(counts), slices.Max(counts)
	fair := math.Inf(1)
	if lo > 0 {
		fair = float64(hi) / float64(lo)
	}
	b.ReportMetric(fair, "fairness")
}

// distinctKeys is the parallel cell of Backend.
func distinctKeys(b *testing.B, d driver.Driver) {
	c := client(b, d)
	k := key(b)
	ms := make([]*locker.Mutex, Keys)
	for i := range ms {
		ms[i] = c.Mutex(fmt.Sprintf("%s/%d", k, i))
	}
	ctx := context.Background()
	var tickets atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tickets.Add(1) <= int64(b.N) {
				h, err := m.Acquire(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				if err := h.Release(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
}

// spin works for d without sleeping, as a critical section that computes
// would (a sleep would add the timer's lateness).
func spin(d time.Duration) {
	for t0 := time.Now(); time.Since(t0) < d; {
	}
}

// A releaser is a grant: a Hold, a MultiLock's hold.
type releaser interface{ Release(context.Context) error }

// contend shares b.N acquisitions among the acquirers, a goroutine each,
// each grant held for CriticalSection, failing b when two grants overlap
// (what names the lock). It reports acq/s and the longest wait
// (max-wait-ms), and returns each acquirer's count of grants.
func contend(b *testing.B, what string, acquire []func(context.Context) (releaser, error)) []int {
	ctx := context.Background()
	var (
		tickets atomic.Int64
		holders atomic.Int32
		maxWait atomic.Int64
	)
	counts := make([]int, len(acquire))
	b.ResetTimer()
	var wg sync.WaitGroup
	for i, acq := range acquire {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tickets.Add(1) <= int64(b.N) {
				t0 := time.Now()
				h, err := acq(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				w := int64(time.Since(t0))
				for m := maxWait.Load(); w > m && !maxWait.CompareAndSwap(m, w); m = maxWait.Load() {
				}
				if holders.Add(1) != 1 {
					b.Error("two holders of " + what + " at once")
				}
				spin(CriticalSection)
				holders.Add(-1)
				counts[i]++
				if err := h.Release(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "acq/s")
	b.ReportMetric(float64(maxWait.Load())/1e6, "max-wait-ms")
	return counts
}
