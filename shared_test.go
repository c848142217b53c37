//go:build go1.25

package locker_test

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"weak"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
)

// contendOneKey runs n goroutines on one key, each locking its handle
// rounds times (holding it 1ms), and returns the backend calls per
// acquisition. handle makes goroutine i's handle.
func contendOneKey(t *testing.T, b *memdriver.Backend, n, rounds int, handle func(i int) *locker.Mutex) float64 {
	t.Helper()
	before := b.Calls()
	var wg sync.WaitGroup
	for i := range n {
		m := handle(i)
		wg.Go(func() {
			for range rounds {
				if err := m.LockContext(context.Background()); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(time.Millisecond)
				if err := m.UnlockContext(context.Background()); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	return float64(b.Calls()-before) / float64(n*rounds)
}

// NewMutex handles over one driver on one key line up in the process as
// the handles of one Client do: the backend sees as many calls per
// acquisition, with a driver that queues waiters (memdriver) as with one
// that only polls (bare).
func TestNewMutex_SharedDriverNoHerd(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(*memdriver.Driver) driver.Driver
	}{
		{"memdriver", func(d *memdriver.Driver) driver.Driver { return d }},
		{"polling", func(d *memdriver.Driver) driver.Driver { return bare{d} }},
	} {
		for _, n := range []int{8, 32} {
			t.Run(tc.name+"/"+strconv.Itoa(n), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					const rounds = 20
					b := memdriver.NewBackend()
					d := tc.wrap(b.Driver())
					c := locker.New(d)
					viaClient := contendOneKey(t, b, n, rounds, func(int) *locker.Mutex { return c.Mutex("k") })
					viaNew := contendOneKey(t, b, n, rounds, func(int) *locker.Mutex { return locker.NewMutex(d, "k") })
					t.Logf("backend calls per acquisition: Client handles %.2f, NewMutex handles %.2f", viaClient, viaNew)
					if viaNew > viaClient*1.05 {
						t.Errorf("NewMutex handles: %.2f backend calls per acquisition, Client handles %.2f", viaNew, viaClient)
					}
					if err := c.Close(context.Background()); err != nil {
						t.Fatal(err)
					}
					if n := locker.DefaultClients(); n != 0 {
						t.Errorf("%d default Clients left registered after every handle unlocked", n)
					}
				})
			})
		}
	}
}

// Handles made at different times, the second while the first holds the
// key, share one line: the second waits in the process and sends nothing
// to the backend until the first unlocks.
func TestNewMutex_LateHandleJoinsLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		d := bare{b.Driver()} // polls: a Client of its own would poll the backend
		m1 := locker.NewMutex(d, "k")
		m1.Lock()
		m2 := locker.NewMutex(d, "k")
		locked := make(chan struct{})
		go func() {
			m2.Lock()
			close(locked)
		}()
		synctest.Wait()
		calls := b.Calls()
		time.Sleep(10 * time.Second)
		if got := b.Calls() - calls; got > 4 {
			// Renewals of m1's hold: one per TTL/3 (5s).
			t.Errorf("%d backend calls in 10s while the second handle waited behind the first", got)
		}
		m1.Unlock()
		<-locked
		m2.Unlock()
	})
}

// The renewals of many NewMutex holds over one driver go out in batches,
// as a Client's do: at most 1 round trip per 100 held locks per renewal
// period.
func TestNewMutex_RenewalsBatched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const holds = 10000
		b := memdriver.NewBackend()
		d := &countingDriver{Driver: b.Driver()}
		ms := make([]*locker.Mutex, holds)
		for i := range ms {
			ms[i] = locker.NewMutex(d, "k/"+strconv.Itoa(i), locker.WithTTL(3*time.Second))
			ms[i].Lock()
		}
		before := d.batches.Load()
		const periods = 10
		time.Sleep(periods * time.Second) // renewal period: TTL/3
		trips := d.batches.Load() - before
		perHundred := float64(trips) / periods / (holds / 100)
		t.Logf("%d round trips for %d holds over %d renewal periods: %.3f per 100 locks per period", trips, holds, periods, perHundred)
		if perHundred > 1 {
			t.Errorf("%.3f renewal round trips per 100 locks per period, want at most 1", perHundred)
		}
		if got := d.refreshes.Load(); got < holds*(periods-1) {
			t.Errorf("%d leases renewed, want about %d", got, holds*periods)
		}
		for _, m := range ms {
			if err := m.UnlockContext(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if n := locker.DefaultClients(); n != 0 {
			t.Errorf("%d default Clients left registered after every handle unlocked", n)
		}
	})
}

// After its Unlock a NewMutex handle keeps nothing alive: not its default
// Client (whose watchdog timer is stopped), and the handle itself is
// garbage once the caller drops it.
func TestNewMutex_NoMemoryAfterUnlock(t *testing.T) {
	b := memdriver.NewBackend()
	d := b.Driver()
	m := locker.NewMutex(d, "k", locker.WithTTL(time.Hour))
	m.Lock()
	c := locker.DefaultClientOf(d)
	if c == nil {
		t.Fatal("no default Client registered while a NewMutex handle holds")
	}
	wc, wm := weak.Make(c), weak.Make(m)
	c = nil
	m.Unlock()
	m = nil
	if n := locker.DefaultClients(); n != 0 {
		t.Fatalf("%d default Clients registered after Unlock", n)
	}
	// A few cycles: a goroutine of the unlock that has not yet exited
	// may still hold the Client in the first. (Before, its watchdog timer
	// kept it for TTL/3, an hour here.)
	for i := 0; i < 10 && wc.Value() != nil; i++ {
		runtime.GC()
		runtime.Gosched()
	}
	if wc.Value() != nil {
		t.Error("the default Client is still reachable after the handle's Unlock")
	}
	if wm.Value() != nil {
		t.Error("the NewMutex handle is still reachable after its Unlock")
	}
	// The registry's entry, which holds the driver, goes with the Client
	// (its cleanup runs after a collection, in the background).
	for i := 0; i < 100 && locker.DefaultEntries() != 0; i++ {
		runtime.GC()
		runtime.Gosched()
	}
	if n := locker.DefaultEntries(); n != 0 {
		t.Errorf("%d registry entries left after the default Client was collected", n)
	}
}

// A handle locked and unlocked in a loop takes up the idle default Client
// again rather than making one per pair (BenchmarkMutexUncontended).
func TestNewMutex_IdleClientTakenUp(t *testing.T) {
	d := memdriver.New()
	m := locker.NewMutex(d, "k")
	m.Lock()
	first := locker.DefaultClientOf(d)
	m.Unlock()
	m.Lock()
	again := locker.DefaultClientOf(d)
	m.Unlock()
	runtime.KeepAlive(first)
	if first == nil || again != first {
		t.Errorf("the second lock call used default Client %p, the first %p", again, first)
	}
}

// Options given to NewMutex apply to that handle only, though handles over
// one driver share a Client.
func TestNewMutex_OptionsPerHandle(t *testing.T) {
	b := memdriver.NewBackend()
	d := b.Driver()
	short := locker.NewMutex(d, "a", locker.WithTTL(time.Second))
	long := locker.NewMutex(d, "b", locker.WithTTL(time.Minute))
	short.Lock()
	long.Lock()
	if ha, hb := b.Holders("a"), b.Holders("b"); len(ha) != 1 || len(hb) != 1 || ha[0].TTL != time.Second || hb[0].TTL != time.Minute {
		t.Errorf("holders a %+v, b %+v: want TTLs 1s and 1m", ha, hb)
	}
	short.Unlock()
	long.Unlock()
}

// incomparable is a driver whose values cannot be map keys.
type incomparable struct {
	driver.Driver
	_ []int
}

// A driver value that cannot be a map key gets a Client of its own per
// lock call: the handles work, and nothing is registered.
func TestNewMutex_IncomparableDriver(t *testing.T) {
	b := memdriver.NewBackend()
	for _, d := range []driver.Driver{
		incomparable{Driver: b.Driver()},
		bare{incomparable{Driver: b.Driver()}}, // comparable type, incomparable value
	} {
		m := locker.NewMutex(d, "k")
		m.Lock()
		if n := locker.DefaultClients(); n != 0 {
			t.Errorf("%T: %d default Clients registered", d, n)
		}
		if locker.NewMutex(d, "k").TryLock() {
			t.Errorf("%T: a second handle locked a held key", d)
		}
		m.Unlock()
		rw := locker.NewRWMutex(d, "k")
		rw.Lock()
		rw.Unlock()
	}
}

// NewReentrantMutex handles share their driver's default Client but not
// their holds: a context returned by one is a new owner for another.
func TestNewReentrantMutex_HoldsStayTheHandles(t *testing.T) {
	b := memdriver.NewBackend()
	d := b.Driver()
	r1 := locker.NewReentrantMutex(d, "k")
	r2 := locker.NewReentrantMutex(d, "k")
	ctx, err := r1.Enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r1.Enter(ctx); err != nil {
		t.Fatalf("reentry through the same handle: %v", err)
	}
	if _, err := r2.TryEnter(ctx); err == nil {
		t.Fatal("another NewReentrantMutex handle entered the first one's hold")
	}
	if err := r1.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r1.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if n := locker.DefaultClients(); n != 0 {
		t.Errorf("%d default Clients registered after the last Leave", n)
	}
}

// Handles made per request, as in a handler, over one driver on a few
// keys, while the default Client goes idle, is taken up again and is
// collected: every key stays mutually exclusive, and once all is unlocked
// no default Client is in use.
func TestNewMutex_PerRequestChurn(t *testing.T) {
	d := memdriver.New()
	const keys, workers, rounds = 4, 16, 200
	var inside [keys]atomic.Int32
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				k := (w + i) % keys
				m := locker.NewMutex(d, "k/"+strconv.Itoa(k))
				if err := m.LockContext(context.Background()); err != nil {
					t.Error(err)
					return
				}
				if n := inside[k].Add(1); n != 1 {
					t.Errorf("key %d: %d holders at once", k, n)
				}
				if i%50 == 0 {
					runtime.GC()
				}
				inside[k].Add(-1)
				if err := m.UnlockContext(context.Background()); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if n := locker.DefaultClients(); n != 0 {
		t.Errorf("%d default Clients in use after every handle unlocked", n)
	}
}
