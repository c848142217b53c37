package main

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/redis/go-redis/v9"
)

// The many-locks cell: one process takes n locks on distinct keys and holds
// them for a few renewal periods. It measures the renewal round trips per
// period, the client heap per held lock and the client CPU while holding.

// manySystem is a system in the many-locks cell.
type manySystem struct {
	name, server, desc string
	kind               kind
	// minTTL is the shortest lease the system accepts; the cell's lease
	// is raised to it.
	minTTL time.Duration
	// hold acquires n locks with lease ttl, renewed every ttl/3, and
	// returns them held.
	hold func(e *env, n int, ttl time.Duration) (held, error)
}

// held is n locks held by one process.
type held interface {
	// lost reports how many holds were lost.
	lost() int
	// release unlocks them all and frees the clients.
	release() error
}

type manyResult struct {
	sys             *manySystem
	n, periods      int
	ttl, period     time.Duration
	acquire         time.Duration // time to take all n locks
	heapPerLock     int64         // client heap growth per held lock, after GC
	trips           int64         // round trips while holding
	cpu, srvCPU     time.Duration // client and server CPU while holding
	holding         time.Duration
	lostN           int
	err             error
	tripsPer100Per  float64
	goroutinesAfter int
}

func runMany(e *env, s *manySystem, n, periods int, ttl time.Duration) *manyResult {
	ttl = max(ttl, s.minTTL)
	r := &manyResult{sys: s, n: n, periods: periods, ttl: ttl, period: ttl / 3}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	t0 := time.Now()
	h, err := s.hold(e, n, ttl)
	if err != nil {
		r.err = err
		return r
	}
	r.acquire = time.Since(t0)
	runtime.GC()
	runtime.ReadMemStats(&after)
	r.heapPerLock = (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / int64(n)
	p := e.read(s.server, false)
	time.Sleep(time.Duration(periods) * r.period)
	d := e.since(s.server, p)
	r.trips, r.cpu, r.srvCPU, r.holding = d.trips, d.cpu, d.srvCPU, d.elapsed
	r.tripsPer100Per = float64(r.trips) / (float64(n) / 100) / (d.elapsed.Seconds() / r.period.Seconds())
	r.lostN = h.lost()
	r.err = h.release()
	return r
}

// parallelDo runs f(i) for i in [0, n) on w goroutines and returns the
// first error.
func parallelDo(n, w int, f func(i int) error) error {
	var (
		next  atomic.Int64
		first atomic.Value
		wg    sync.WaitGroup
	)
	for range w {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || first.Load() != nil {
					return
				}
				if err := f(i); err != nil {
					first.CompareAndSwap(nil, err)
				}
			}
		})
	}
	wg.Wait()
	if err, _ := first.Load().(error); err != nil {
		return err
	}
	return nil
}

const manyWorkers = 32

func redisManySystems() []*manySystem {
	return []*manySystem{
		{
			name: "locker", server: "redis", kind: kindLocker,
			desc: "locker.Mutex × n on one redisdriver; the watchdog renews due leases in batches (one pipelined round trip per 1000)",
			hold: holdLockerRedis,
		},
		{
			name: "locker NewMutex", server: "redis", kind: kindLocker,
			desc: "as locker, but each handle made with locker.NewMutex(drv, key, WithTTL): the handles share the driver's default Client and its watchdog",
			hold: func(e *env, n int, ttl time.Duration) (held, error) { return holdLockerRedisAs(e, n, ttl, true) },
		},
		{
			name: "redislock", server: "redis", kind: kindPeer,
			desc: "redislock Obtain × n; no watchdog, so the application refreshes each lock every ttl/3 (Lock.Refresh, one round trip each, 32 goroutines)",
			hold: holdRedislock,
		},
	}
}

type lockerHeld struct {
	ms      []*locker.Mutex
	cleanup func()
}

func (h *lockerHeld) lost() int {
	n := 0
	for _, m := range h.ms {
		if m.Err() != nil {
			n++
		}
	}
	return n
}

func (h *lockerHeld) release() error {
	defer h.cleanup()
	return parallelDo(len(h.ms), manyWorkers, func(i int) error {
		err := h.ms[i].UnlockContext(context.Background())
		h.ms[i] = nil
		return err
	})
}

// holdLocker takes n locker.Mutex on one driver, from one Client.
func holdLocker(drv driver.Driver, n int, ttl time.Duration, prefix string, cleanup func()) (held, error) {
	return holdLockerAs(drv, n, ttl, prefix, false, cleanup)
}

// holdLockerAs takes n locker.Mutex on one driver: from one Client, or,
// with viaNew, each made with locker.NewMutex.
func holdLockerAs(drv driver.Driver, n int, ttl time.Duration, prefix string, viaNew bool, cleanup func()) (held, error) {
	h := &lockerHeld{ms: make([]*locker.Mutex, n), cleanup: cleanup}
	opts := []locker.Option{locker.WithTTL(ttl), locker.WithErrorHandler(func(error) {})}
	c := locker.New(drv, opts...)
	err := parallelDo(n, manyWorkers, func(i int) error {
		key := fmt.Sprintf("%s/%d", prefix, i)
		m := c.Mutex(key)
		if viaNew {
			m = locker.NewMutex(drv, key, opts...)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := m.LockContext(ctx); err != nil {
			return err
		}
		h.ms[i] = m
		return nil
	})
	if err != nil {
		_ = parallelDo(n, manyWorkers, func(i int) error {
			if h.ms[i] != nil {
				_ = h.ms[i].UnlockContext(context.Background())
			}
			return nil
		})
		cleanup()
		return nil, err
	}
	return h, nil
}

func holdLockerRedis(e *env, n int, ttl time.Duration) (held, error) {
	return holdLockerRedisAs(e, n, ttl, false)
}

func holdLockerRedisAs(e *env, n int, ttl time.Duration, viaNew bool) (held, error) {
	c := redis.NewClient(&redis.Options{Addr: e.redis.addr, ContextTimeoutEnabled: true, Dialer: e.trips["redis"].DialContext, PoolSize: manyWorkers})
	d, err := redisdriver.New(c, nil)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return holdLockerAs(d, n, ttl, fmt.Sprintf("bench/many/%d", time.Now().UnixNano()), viaNew, func() { _ = c.Close() })
}

type redislockHeld struct {
	c     *redis.Client
	ls    []*redislock.Lock
	stop  chan struct{}
	done  chan struct{}
	lostN atomic.Int64
}

func holdRedislock(e *env, n int, ttl time.Duration) (held, error) {
	c := redis.NewClient(&redis.Options{Addr: e.redis.addr, ContextTimeoutEnabled: true, Dialer: e.trips["redis"].DialContext, PoolSize: manyWorkers})
	rl := redislock.New(c)
	h := &redislockHeld{c: c, ls: make([]*redislock.Lock, n), stop: make(chan struct{}), done: make(chan struct{})}
	prefix := fmt.Sprintf("bench/many-redislock/%d", time.Now().UnixNano())
	err := parallelDo(n, manyWorkers, func(i int) error {
		l, err := rl.Obtain(context.Background(), fmt.Sprintf("%s/%d", prefix, i), ttl, nil)
		h.ls[i] = l
		return err
	})
	if err != nil {
		close(h.stop)
		close(h.done)
		_ = h.release()
		return nil, err
	}
	// The application's watchdog: refresh every lock every ttl/3.
	go func() {
		defer close(h.done)
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
			_ = parallelDo(n, manyWorkers, func(i int) error {
				if err := h.ls[i].Refresh(context.Background(), ttl, nil); err != nil {
					h.lostN.Add(1)
				}
				return nil
			})
		}
	}()
	return h, nil
}

func (h *redislockHeld) lost() int { return int(h.lostN.Load()) }

func (h *redislockHeld) release() error {
	close(h.stop)
	<-h.done
	defer h.c.Close()
	return parallelDo(len(h.ls), manyWorkers, func(i int) error {
		if h.ls[i] == nil {
			return nil
		}
		return h.ls[i].Release(context.Background())
	})
}
