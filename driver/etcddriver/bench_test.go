package etcddriver_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/etcddriver"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// The benchmarks run against the package's etcd server, a process of its
// own (fsync on), so that allocations count the client's only:
//
//	go test -run XXX -bench . -benchmem ./driver/etcddriver

const benchTTL = 10 * time.Second

// benchURL returns the client URL of the server the benchmarks use.
func benchURL(b testing.TB) string {
	needServer(b)
	return server.ClientURL
}

// BenchmarkMutexLockUnlock is one uncontended locker.Mutex Lock+Unlock
// pair over etcddriver.
func BenchmarkMutexLockUnlock(b *testing.B) {
	d := newDriverOn(b, newClientAt(b, benchURL(b)), nil)
	m := locker.NewMutex(d, uniqueKey(b, "k"), locker.WithTTL(benchTTL))
	m.Lock() // warm up: the key's watch, a pooled lease
	m.Unlock()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		m.Lock()
		m.Unlock()
	}
}

// BenchmarkConcurrencyMutex is the same pair with etcd's own
// concurrency.Mutex, on a session (lease) made once.
func BenchmarkConcurrencyMutex(b *testing.B) {
	c := newClientAt(b, benchURL(b))
	s, err := concurrency.NewSession(c, concurrency.WithTTL(int(benchTTL/time.Second)))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	m := concurrency.NewMutex(s, "bench/"+uniqueKey(b, "k"))
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := m.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawTxnDelete is the floor of any etcd lock: a put-if-absent
// transaction and a delete, with no lease, no owner check on release, no
// token and no waiting.
func BenchmarkRawTxnDelete(b *testing.B) {
	c := newClientAt(b, benchURL(b))
	key := "bench/" + uniqueKey(b, "k")
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		resp, err := c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).Then(clientv3.OpPut(key, "")).Commit()
		if err != nil || !resp.Succeeded {
			b.Fatal(resp, err)
		}
		if _, err := c.Delete(ctx, key); err != nil {
			b.Fatal(err)
		}
	}
}

// spin busy-waits for d: time.Sleep(100µs) sleeps about 1 ms on these
// machines, which would hide the lock's own cost.
func spin(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

// contendedLock is what one goroutine of the contended benchmark locks.
type contendedLock interface {
	lock(ctx context.Context) error
	unlock(ctx context.Context) error
}

type lockerMutex struct{ m *locker.Mutex }

func (l lockerMutex) lock(ctx context.Context) error   { return l.m.LockContext(ctx) }
func (l lockerMutex) unlock(ctx context.Context) error { return l.m.UnlockContext(ctx) }

type etcdMutex struct{ m *concurrency.Mutex }

func (l etcdMutex) lock(ctx context.Context) error   { return l.m.Lock(ctx) }
func (l etcdMutex) unlock(ctx context.Context) error { return l.m.Unlock(ctx) }

// contendedResult is the outcome of one contended run.
type contendedResult struct {
	acquisitions int
	elapsed      time.Duration
	counts       []int // per goroutine
	maxWait      time.Duration
}

func (r contendedResult) rate() float64 {
	return float64(r.acquisitions) / r.elapsed.Seconds()
}

// fairness is max/min acquisitions per goroutine (+Inf if one starved).
func (r contendedResult) fairness() float64 {
	lo, hi := slices.Min(r.counts), slices.Max(r.counts)
	if lo == 0 {
		return float64(hi) / 0
	}
	return float64(hi) / float64(lo)
}

func (r contendedResult) String() string {
	return fmt.Sprintf("%d acquisitions in %v: %.0f/s, per goroutine %v (max/min %.2f), longest wait %v",
		r.acquisitions, r.elapsed.Round(time.Millisecond), r.rate(), r.counts, r.fairness(), r.maxWait.Round(time.Millisecond))
}

// runContended runs locks[i] in goroutine i, all on one key, each holding
// it for cs, until total acquisitions are done or d passes.
func runContended(tb testing.TB, locks []contendedLock, cs time.Duration, total int, d time.Duration) contendedResult {
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	var (
		left    atomic.Int64
		holders atomic.Int32
		maxWait atomic.Int64
		wg      sync.WaitGroup
		counts  = make([]int, len(locks))
		stop    = time.Now().Add(d)
		start   = make(chan struct{})
	)
	left.Store(int64(total))
	for i, l := range locks {
		wg.Go(func() {
			<-start
			for left.Add(-1) >= 0 && time.Now().Before(stop) {
				t0 := time.Now()
				if err := l.lock(ctx); err != nil {
					tb.Errorf("goroutine %d: lock: %v", i, err)
					return
				}
				if w := int64(time.Since(t0)); w > maxWait.Load() {
					maxWait.Store(w) // racy max; good enough for a report
				}
				if holders.Add(1) != 1 {
					tb.Errorf("two holders at once")
				}
				spin(cs)
				holders.Add(-1)
				counts[i]++
				if err := l.unlock(ctx); err != nil {
					tb.Errorf("goroutine %d: unlock: %v", i, err)
					return
				}
			}
		})
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	r := contendedResult{elapsed: time.Since(t0), counts: counts, maxWait: time.Duration(maxWait.Load())}
	for _, n := range counts {
		r.acquisitions += n
	}
	return r
}

// Contention setup: 8 goroutines, each with its own handle, on 4 clients
// (2 per client), one key, a 100 µs critical section.
const (
	contClients    = 4
	contGoroutines = 8
	contCS         = 100 * time.Microsecond
)

// lockerLocks returns one locker.Mutex per goroutine over drivers on
// separate clients.
func lockerLocks(tb testing.TB, key string) []contendedLock {
	ds := make([]*etcddriver.Driver, contClients)
	for i := range ds {
		ds[i] = newDriverOn(tb, newClientAt(tb, benchURL(tb)), nil)
	}
	locks := make([]contendedLock, contGoroutines)
	for i := range locks {
		locks[i] = lockerMutex{locker.NewMutex(ds[i%contClients], key, locker.WithTTL(benchTTL))}
	}
	return locks
}

// etcdLocks returns one concurrency.Mutex per goroutine, each on a session
// of its own (two mutexes on one session would share ownership) over
// separate clients.
func etcdLocks(tb testing.TB, key string) []contendedLock {
	cs := make([]*clientv3.Client, contClients)
	for i := range cs {
		cs[i] = newClientAt(tb, benchURL(tb))
	}
	locks := make([]contendedLock, contGoroutines)
	for i := range locks {
		s, err := concurrency.NewSession(cs[i%contClients], concurrency.WithTTL(int(benchTTL/time.Second)))
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { s.Close() })
		locks[i] = etcdMutex{concurrency.NewMutex(s, "bench/"+key)}
	}
	return locks
}

func benchContended(b *testing.B, mk func(testing.TB, string) []contendedLock) {
	locks := mk(b, uniqueKey(b, "k"))
	runContended(b, locks, contCS, 2*contGoroutines, time.Minute) // warm up
	b.ResetTimer()
	r := runContended(b, locks, contCS, b.N, time.Minute)
	b.StopTimer()
	b.ReportMetric(r.rate(), "acq/s")
	b.ReportMetric(r.fairness(), "max/min")
}

// BenchmarkContendedMutex: locker.Mutex over etcddriver, 8 goroutines on 4
// clients, one key, 100 µs critical section; ns/op is per acquisition.
func BenchmarkContendedMutex(b *testing.B) { benchContended(b, lockerLocks) }

// BenchmarkContendedConcurrencyMutex: the same with concurrency.Mutex.
func BenchmarkContendedConcurrencyMutex(b *testing.B) { benchContended(b, etcdLocks) }
