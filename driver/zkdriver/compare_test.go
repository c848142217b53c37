//go:build unix

package zkdriver_test

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/zkdriver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-zookeeper/zk"
)

// EnvCompare, set to "1", runs TestCompareZKLock.
const envCompare = "LOCKER_ZK_COMPARE"

// TestCompareZKLock measures locker.Mutex over zkdriver and go-zookeeper's
// zk.Lock side by side: rounds that alternate between the two, so that
// both see the same load on a shared machine, then the median of each
// figure over the rounds, printed as the Markdown tables of BENCHMARKS.md.
//
//	LOCKER_ZK_COMPARE=1 LOCKER_REQUIRE_SERVERS=1 go test -run TestCompareZKLock -v ./driver/zkdriver
func TestCompareZKLock(t *testing.T) {
	if os.Getenv(envCompare) != "1" {
		t.Skip("set " + envCompare + "=1 to run the comparison with zk.Lock (a few minutes)")
	}
	const rounds = 7
	const unDur, conDur = time.Second, 3 * time.Second
	results := map[string][]unResult{}
	cres := map[string][]contendResult{}

	// Uncontended: one handle, one key.
	var lcnt, zcnt countingDialer
	ld := countedDriver(t, &lcnt)
	lm := locker.NewMutex(ld, uniqueKey(t, "un"))
	zl := zk.NewLock(countedConn(t, &zcnt), "/zklock-bench/"+encodeForZK(uniqueKey(t, "un")), zk.WorldACL(zk.PermAll))

	// Contended: 8 goroutines, one key, each with a handle and a
	// connection of its own (as zk.Lock needs); locker also with 8
	// handles on 2 connections.
	var c8, c2, cz countingDialer
	key8, key2 := uniqueKey(t, "c8"), uniqueKey(t, "c2")
	var m8, m2, mz []mutexLike
	d2 := []*zkdriver.Driver{countedDriver(t, &c2), countedDriver(t, &c2)}
	zpath := "/zklock-bench/" + encodeForZK(uniqueKey(t, "cz"))
	for i := range contenders {
		m8 = append(m8, lockerMutex{locker.NewMutex(countedDriver(t, &c8), key8)})
		m2 = append(m2, lockerMutex{locker.NewMutex(d2[i%2], key2)})
		mz = append(mz, zk.NewLock(countedConn(t, &cz), zpath, zk.WorldACL(zk.PermAll)))
	}

	for r := range rounds {
		systems := []*pairSystem{
			{name: "locker-zk", lock: func() error { lm.Lock(); return nil }, unlock: func() error { lm.Unlock(); return nil }, cnt: &lcnt},
			{name: "zk.Lock", lock: zl.Lock, unlock: zl.Unlock, cnt: &zcnt},
		}
		csteps := []struct {
			name string
			ms   []mutexLike
			cnt  *countingDialer
		}{
			{"locker-zk, 8 conns", m8, &c8},
			{"zk.Lock, 8 conns", mz, &cz},
			{"locker-zk, 2 conns", m2, &c2},
		}
		if r%2 == 1 {
			slices.Reverse(systems)
			slices.Reverse(csteps)
		}
		results = runUncontended(t, systems, results, unDur)
		for _, c := range csteps {
			res, err := contend(c.ms, c.cnt, 0, conDur)
			if err != nil {
				t.Fatal(err)
			}
			cres[c.name] = append(cres[c.name], res)
		}
		t.Logf("round %d done", r+1)
	}

	t.Log(compareTables(results, cres))
}

// An unResult is a round of the uncontended comparison, per pair.
type unResult struct{ pairsPerSec, p50us, meanus, p99us, cpuus, rt, allocs, bytes float64 }

// A pairSystem is a lock of the uncontended comparison, with what its
// pairs cost so far in a round.
type pairSystem struct {
	name         string
	lock, unlock func() error
	cnt          *countingDialer
	lat          []time.Duration
	busy         time.Duration
	writes       int64
	cpu          time.Duration
	mallocs      uint64
	bytes        uint64
}

// runUncontended runs the systems' lock+unlock pairs in alternating
// blocks of 20 pairs for 2*dur, so that both meet the same load, and
// appends each system's figures to results.
func runUncontended(t *testing.T, systems []*pairSystem, results map[string][]unResult, dur time.Duration) map[string][]unResult {
	var ms0, ms1 runtime.MemStats
	start := time.Now()
	for time.Since(start) < 2*dur {
		for _, sy := range systems {
			runtime.ReadMemStats(&ms0)
			w0 := sy.cnt.writes.Load()
			c0 := drivertest.CPUTime()
			b0 := time.Now()
			for range 20 {
				t0 := time.Now()
				if err := sy.lock(); err != nil {
					t.Fatal(err)
				}
				if err := sy.unlock(); err != nil {
					t.Fatal(err)
				}
				sy.lat = append(sy.lat, time.Since(t0))
			}
			sy.busy += time.Since(b0)
			sy.cpu += drivertest.CPUTime() - c0
			sy.writes += sy.cnt.writes.Load() - w0
			runtime.ReadMemStats(&ms1)
			sy.mallocs += ms1.Mallocs - ms0.Mallocs
			sy.bytes += ms1.TotalAlloc - ms0.TotalAlloc
		}
	}
	for _, sy := range systems {
		n := float64(len(sy.lat))
		slices.Sort(sy.lat)
		results[sy.name] = append(results[sy.name], unResult{
			pairsPerSec: n / sy.busy.Seconds(),
			p50us:       float64(sy.lat[len(sy.lat)/2].Microseconds()),
			meanus:      float64(sy.busy.Microseconds()) / n,
			p99us:       float64(sy.lat[len(sy.lat)*99/100].Microseconds()),
			cpuus:       float64(sy.cpu.Microseconds()) / n,
			rt:          float64(sy.writes) / n,
			allocs:      float64(sy.mallocs) / n,
			bytes:       float64(sy.bytes) / n,
		})
		sy.lat, sy.busy, sy.cpu, sy.writes, sy.mallocs, sy.bytes = sy.lat[:0], 0, 0, 0, 0, 0
	}
	return results
}

// compareTables formats the medians over the rounds of results and cres
// as the Markdown tables of BENCHMARKS.md, with the spread of the rounds.
func compareTables(results map[string][]unResult, cres map[string][]contendResult) string {
	med := func(xs []float64) float64 {
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	var out strings.Builder
	fmt.Fprintf(&out, "\n| uncontended, 1 goroutine | pairs/s | p50 / mean / p99 µs | round trips/pair | client CPU µs/pair | allocs/pair | B/pair |\n|---|--:|--:|--:|--:|--:|--:|\n")
	for _, name := range []string{"locker-zk", "zk.Lock"} {
		var a, b2, b3, b4, c, c2, d, e []float64
		for _, x := range results[name] {
			a, b2, b3, b4 = append(a, x.pairsPerSec), append(b2, x.p50us), append(b3, x.meanus), append(b4, x.p99us)
			c, c2, d, e = append(c, x.rt), append(c2, x.cpuus), append(d, x.allocs), append(e, x.bytes)
		}
		fmt.Fprintf(&out, "| %s | %.0f | %.0f / %.0f / %.0f | %.2f | %.0f | %.0f | %.0f |\n", name, med(a), med(b2), med(b3), med(b4), med(c), med(c2), med(d), med(e))
	}
	fmt.Fprintf(&out, "\n| contended, 8 goroutines, 100µs | acq/s | fairness max/min | handoff p50 / p99 µs | unlock p50 µs | round trips/acq |\n|---|--:|--:|--:|--:|--:|\n")
	for _, name := range []string{"locker-zk, 8 conns", "zk.Lock, 8 conns", "locker-zk, 2 conns"} {
		var a, b2, c, d, e, f []float64
		for _, x := range cres[name] {
			a, b2 = append(a, x.acqPerSec), append(b2, x.fairness)
			c, d = append(c, float64(x.handoffP50.Microseconds())), append(d, float64(x.handoffP99.Microseconds()))
			e, f = append(e, float64(x.unlockP50.Microseconds())), append(f, x.roundTrips)
		}
		fmt.Fprintf(&out, "| %s | %.0f | %.3f | %.0f / %.0f | %.0f | %.2f |\n", name, med(a), med(b2), med(c), med(d), med(e), med(f))
	}
	// Per-round acquisitions per second, to show the spread.
	fmt.Fprintf(&out, "\nacq/s per round:\n")
	for _, name := range []string{"locker-zk, 8 conns", "zk.Lock, 8 conns", "locker-zk, 2 conns"} {
		var xs []string
		for _, x := range cres[name] {
			xs = append(xs, fmt.Sprintf("%.0f", x.acqPerSec))
		}
		fmt.Fprintf(&out, "  %s: %s\n", name, strings.Join(xs, " "))
	}
	fmt.Fprintf(&out, "pairs/s per round:\n")
	for _, name := range []string{"locker-zk", "zk.Lock"} {
		var xs []string
		for _, x := range results[name] {
			xs = append(xs, fmt.Sprintf("%.0f", x.pairsPerSec))
		}
		fmt.Fprintf(&out, "  %s: %s\n", name, strings.Join(xs, " "))
	}
	return out.String()
}
