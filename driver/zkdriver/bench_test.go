//go:build go1.25

package zkdriver_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/zkdriver"
	"github.com/go-zookeeper/zk"
)

// Benchmarks: locker.Mutex over zkdriver side by side with go-zookeeper's
// own zk.Lock, in one run, on the shared test server.
//
//	LOCKER_REQUIRE_SERVERS=1 go test -run XXX -bench . -benchtime 3s ./driver/zkdriver
//
// Round trips are the client's Write calls on the counted connections
// (package zk writes the requests queued together in one Write: where
// goroutines share a connection, a Write may carry several requests, and
// Writes count round trips, not requests; bench/ counts both).

// countingDialer counts the Write calls on the connections it makes.
type countingDialer struct{ writes atomic.Int64 }

func (c *countingDialer) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	conn, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, n: &c.writes}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(p)
}

// benchSession is long, so that go-zookeeper's pings (every third of it)
// hardly count.
const benchSession = 30 * time.Second

// countedDriver returns a driver over a new connection whose writes cnt
// counts.
func countedDriver(b testing.TB, cnt *countingDialer) *zkdriver.Driver {
	b.Helper()
	sess := &zkdriver.Session{Dialer: cnt.dial}
	conn, _, err := zk.Connect([]string{server(b).Addr}, benchSession, sess.ConnOption(), quiet(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(conn.Close)
	d, err := zkdriver.New(conn, sess, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sess.Wait(ctx); err != nil {
		b.Fatal(err)
	}
	return d
}

// countedConn returns a plain go-zookeeper connection whose writes cnt
// counts.
func countedConn(b testing.TB, cnt *countingDialer) *zk.Conn {
	b.Helper()
	conn, ev, err := zk.Connect([]string{server(b).Addr}, benchSession, zk.WithDialer(cnt.dial), quiet(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(conn.Close)
	for e := range ev {
		if e.State == zk.StateHasSession {
			break
		}
	}
	return conn
}

// BenchmarkUncontended is one goroutine locking and unlocking one key.
func BenchmarkUncontended(b *testing.B) {
	b.Run("locker-zk", func(b *testing.B) {
		var cnt countingDialer
		d := countedDriver(b, &cnt)
		m := locker.NewMutex(d, uniqueKey(b, "k"))
		m.Lock()
		m.Unlock()
		b.ReportAllocs()
		start := cnt.writes.Load()
		b.ResetTimer()
		for range b.N {
			m.Lock()
			m.Unlock()
		}
		b.StopTimer()
		b.ReportMetric(float64(cnt.writes.Load()-start)/float64(b.N), "roundtrips/op")
	})
	b.Run("zk.Lock", func(b *testing.B) {
		var cnt countingDialer
		conn := countedConn(b, &cnt)
		l := zk.NewLock(conn, "/zklock-bench/"+encodeForZK(uniqueKey(b, "k")), zk.WorldACL(zk.PermAll))
		if err := l.Lock(); err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		start := cnt.writes.Load()
		b.ResetTimer()
		for range b.N {
			if err := l.Lock(); err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(cnt.writes.Load()-start)/float64(b.N), "roundtrips/op")
	})
}

// encodeForZK makes a test key usable as one znode name for zk.Lock.
func encodeForZK(s string) string {
	out := []byte(s)
	for i, c := range out {
		if c == '/' || c == '#' || c == '.' {
			out[i] = '_'
		}
	}
	return string(out)
}

// contenders is the number of goroutines of BenchmarkContended.
const contenders = 8

// critical is the critical section of BenchmarkContended, spun rather than
// slept: time.Sleep(100µs) sleeps about a millisecond here.
const critical = 100 * time.Microsecond

func spin(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

// mutexLike is what BenchmarkContended drives.
type mutexLike interface {
	Lock() error
	Unlock() error
}

type lockerMutex struct{ m *locker.Mutex }

func (l lockerMutex) Lock() error   { return l.m.LockContext(context.Background()) }
func (l lockerMutex) Unlock() error { return l.m.UnlockContext(context.Background()) }

// BenchmarkContended is 8 goroutines, each with a handle of its own, locking
// one key over and over with a 100µs critical section. Each op is one
// acquisition. It reports acquisitions per second, fairness (most / fewest
// acquisitions of a goroutine), the handoff latency (next holder's Lock
// returning minus the previous holder's Unlock returning; 0 when negative)
// and round trips per acquisition.
func BenchmarkContended(b *testing.B) {
	for _, conns := range []int{contenders, 2} {
		b.Run(fmt.Sprintf("locker-zk/conns=%d", conns), func(b *testing.B) {
			var cnt countingDialer
			ds := make([]*zkdriver.Driver, conns)
			for i := range ds {
				ds[i] = countedDriver(b, &cnt)
			}
			key := uniqueKey(b, "k")
			ms := make([]mutexLike, contenders)
			for i := range ms {
				ms[i] = lockerMutex{locker.NewMutex(ds[i%conns], key)}
			}
			runContended(b, ms, &cnt)
		})
	}
	b.Run(fmt.Sprintf("zk.Lock/conns=%d", contenders), func(b *testing.B) {
		var cnt countingDialer
		path := "/zklock-bench/" + encodeForZK(uniqueKey(b, "k"))
		ms := make([]mutexLike, contenders)
		for i := range ms {
			ms[i] = zk.NewLock(countedConn(b, &cnt), path, zk.WorldACL(zk.PermAll))
		}
		runContended(b, ms, &cnt)
	})
}

func runContended(b *testing.B, ms []mutexLike, cnt *countingDialer) {
	n := b.N
	b.ResetTimer()
	res, err := contend(ms, cnt, n, 0)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(res.acqPerSec, "acq/s")
	b.ReportMetric(res.fairness, "fairness")
	b.ReportMetric(float64(res.handoffP50.Microseconds()), "handoff-p50-µs")
	b.ReportMetric(float64(res.handoffP99.Microseconds()), "handoff-p99-µs")
	b.ReportMetric(float64(res.unlockP50.Microseconds()), "unlock-p50-µs")
	b.ReportMetric(res.roundTrips, "roundtrips/acq")
}

// contendResult is what contend measures.
type contendResult struct {
	acquisitions           int
	acqPerSec              float64
	fairness               float64 // most / fewest acquisitions of a goroutine
	handoffP50, handoffP99 time.Duration
	unlockP50              time.Duration
	roundTrips             float64 // per acquisition
}

// contend runs the goroutines of ms, each locking and unlocking its mutex
// over and over with a critical section of critical, until n acquisitions
// (n > 0) or for dur.
func contend(ms []mutexLike, cnt *countingDialer, n int, dur time.Duration) (contendResult, error) {
	const maxAcq = 1 << 20
	size := n + len(ms)
	if n <= 0 {
		size = maxAcq
	}
	lockRet := make([]time.Time, size)
	unlockCall := make([]time.Time, size)
	unlockRet := make([]time.Time, size)
	counts := make([]int, len(ms))
	var (
		next    atomic.Int64 // acquisition index
		holders atomic.Int32
		stop    atomic.Bool
		wg      sync.WaitGroup
		errOnce sync.Once
		failure error
	)
	start := cnt.writes.Load()
	t0 := time.Now()
	if dur > 0 {
		time.AfterFunc(dur, func() { stop.Store(true) })
	}
	for g, m := range ms {
		wg.Go(func() {
			for {
				if err := m.Lock(); err != nil {
					errOnce.Do(func() { failure = err })
					return
				}
				got := time.Now()
				if holders.Add(1) != 1 {
					errOnce.Do(func() { failure = fmt.Errorf("two holders at once") })
				}
				i := int(next.Add(1)) - 1
				if i >= size {
					holders.Add(-1)
					_ = m.Unlock()
					return
				}
				lockRet[i] = got
				counts[g]++
				spin(critical)
				holders.Add(-1)
				unlockCall[i] = time.Now()
				if err := m.Unlock(); err != nil {
					errOnce.Do(func() { failure = err })
					return
				}
				unlockRet[i] = time.Now()
				if (n > 0 && i+1 >= n) || stop.Load() {
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(t0)
	if failure != nil {
		return contendResult{}, failure
	}
	total := min(int(next.Load()), size)
	return summarize(lockRet[:total], unlockCall[:total], unlockRet[:total], counts, elapsed, cnt.writes.Load()-start), nil
}

// summarize computes contend's result from the times of the acquisitions
// (their grants, and their unlocks' calls and returns, in the order of the
// grants), the acquisitions per goroutine, the time taken and the round
// trips made.
func summarize(lockRet, unlockCall, unlockRet []time.Time, counts []int, elapsed time.Duration, writes int64) contendResult {
	total := len(lockRet)
	var hand, unl []time.Duration
	for i := 0; i < total; i++ {
		if !unlockRet[i].IsZero() {
			unl = append(unl, unlockRet[i].Sub(unlockCall[i]))
		}
		if i+1 < total && !unlockRet[i].IsZero() && !lockRet[i+1].IsZero() {
			hand = append(hand, max(lockRet[i+1].Sub(unlockRet[i]), 0))
		}
	}
	slices.Sort(hand)
	slices.Sort(unl)
	lo, hi := slices.Min(counts), slices.Max(counts)
	r := contendResult{
		acquisitions: total,
		acqPerSec:    float64(total) / elapsed.Seconds(),
		fairness:     float64(hi) / float64(max(lo, 1)),
		roundTrips:   float64(writes) / float64(total),
	}
	if len(hand) > 0 {
		r.handoffP50, r.handoffP99 = hand[len(hand)/2], hand[len(hand)*99/100]
	}
	if len(unl) > 0 {
		r.unlockP50 = unl[len(unl)/2]
	}
	return r
}
