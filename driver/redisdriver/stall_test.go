package redisdriver_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/internal/netcount"
	"github.com/go-locker/locker/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// TestStallGuardDials: while the server (the cluster's one node, the
// ring's one shard) is paused, 8 goroutines that each call TryAcquire
// with a 100ms deadline, again and again for 2s, make the client dial a
// bounded number of connections: those of the calls under way when the
// server stopped, the few that the stall guard lets time out before it
// sends its PING, and a PING a second; not one per timed-out call. Each
// kind of client, made with go-redis's defaults or with
// ContextTimeoutEnabled.
func TestStallGuardDials(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: pauses a server for 2s per kind of client")
	}
	for _, k := range []string{"Client", "ClusterClient", "Ring"} {
		for _, ctxTimeout := range []bool{false, true} {
			name := k + "/default"
			if ctxTimeout {
				name = k + "/ctx"
			}
			t.Run(name, func(t *testing.T) { stallGuardDials(t, k, ctxTimeout) })
		}
	}
}

func stallGuardDials(t *testing.T, kind string, ctxTimeout bool) {
	var srv *testserver.Server
	var dials netcount.Counter
	var c redis.UniversalClient
	switch kind {
	case "Client":
		srv = privateServer(t)
		c = redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: ctxTimeout, Dialer: dials.DialContext})
	case "ClusterClient":
		srv = testserver.RedisCluster(t)
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr}, ContextTimeoutEnabled: ctxTimeout, Dialer: dials.DialContext})
	case "Ring":
		srv = privateServer(t)
		c = redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": srv.Addr}, ContextTimeoutEnabled: ctxTimeout, Dialer: dials.DialContext})
	}
	t.Cleanup(func() { _ = c.Close() })
	d := newDriver(t, c)
	k := uniqueKey(t, "k")
	mustAcquire(t, d, req(k, owner(), driver.Exclusive, 30*time.Second)) // loads a cluster's slot map

	const goroutines, pause = 8, 2 * time.Second
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	before := dials.Dials()
	end := time.Now().Add(pause)
	var wg sync.WaitGroup
	var mu sync.Mutex
	calls := 0
	for g := range goroutines {
		wg.Go(func() {
			for i := 0; time.Now().Before(end); i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				_, _ = d.TryAcquire(ctx, req(fmt.Sprintf("%s/%d/%d", k, g, i), owner(), driver.Exclusive, time.Second))
				cancel()
				mu.Lock()
				calls++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	during := dials.Dials() - before
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "TryAcquire after the pause", 10*time.Second, func() error {
		l, err := d.TryAcquire(ctxT(t), req(k+"/after", owner(), driver.Exclusive, time.Second))
		if err == nil {
			err = d.Release(ctxT(t), l)
		}
		return err
	})
	// The calls under way, the stallAfter (3) that time out before the
	// PING, a PING a second, and one for the client's own work (a
	// cluster's slot map reload, a ring's heartbeat).
	limit := int64(goroutines + 3 + int(pause/time.Second) + 1)
	t.Logf("%d calls with the server paused for %v: %d dials (limit %d)", calls, pause, during, limit)
	if during > limit {
		t.Errorf("%d dials during the pause; want at most %d (%d calls)", during, limit, calls)
	}
}
