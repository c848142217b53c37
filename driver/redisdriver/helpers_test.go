package redisdriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/testflag"
	"github.com/go-locker/locker/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// backend makes clients of one kind of server for a test.
type backend struct {
	name string
	// client returns a new client of the test's server; it is closed at
	// the test's cleanup.
	client func(t *testing.T) redis.UniversalClient
}

// forEachBackend runs f as a subtest against a real redis-server (skipped
// when none is installed, see testserver), over RESP3 (go-redis's default)
// and RESP2.
func forEachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	t.Run("redis", func(t *testing.T) {
		srv := realServer(t)
		f(t, backend{name: "redis", client: func(t *testing.T) redis.UniversalClient {
			return newClient(t, srv.Addr)
		}})
	})
	t.Run("redis-resp2", func(t *testing.T) {
		srv := realServer(t)
		f(t, backend{name: "redis-resp2", client: func(t *testing.T) redis.UniversalClient {
			c := redis.NewClient(&redis.Options{Addr: srv.Addr, Protocol: 2, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = c.Close() })
			return c
		}})
	})
}

// realServer returns the package's shared redis-server or skips t.
func realServer(t *testing.T) *testserver.Server {
	t.Helper()
	if realRedis == nil {
		testserver.SkipOrFail(t, realRedisErr)
	}
	return realRedis
}

func newClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newClusterClient returns a ClusterClient of the cluster whose nodes
// include addrs, closed at t's cleanup.
func newClusterClient(t *testing.T, addrs ...string) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// defaultClusterClient is newClusterClient with go-redis's default options
// (no ContextTimeoutEnabled).
func defaultClusterClient(t *testing.T, addrs ...string) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func newDriver(t *testing.T, c redis.UniversalClient) *redisdriver.Driver {
	t.Helper()
	d, err := redisdriver.New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	made.Add(t, d, c, nil)
	return d
}

// owner returns a fresh owner string of 32 hex digits.
func owner() string { return drivertest.Owner() }

// uniqueKey returns a lock key not used by any other test on the shared
// server.
func uniqueKey(t *testing.T, name string) string { return drivertest.UniqueKey(t, name) }

func ctxT(t *testing.T) context.Context { return drivertest.Context(t, 10*time.Second) }

func req(key, owner string, mode driver.Mode, ttl time.Duration) driver.Request {
	return driver.Request{Key: key, Owner: owner, Mode: mode, TTL: ttl}
}

func mustAcquire(t *testing.T, d driver.Driver, r driver.Request) driver.Lease {
	t.Helper()
	return drivertest.MustAcquire(ctxT(t), t, d, r, r.TTL.Truncate(time.Millisecond))
}

// privateServer starts a redis-server of t's own, for tests that kill it.
func privateServer(t *testing.T) *testserver.Server {
	t.Helper()
	return testserver.PrivateRedis(t)
}

func newDriverErr(c redis.UniversalClient) (*redisdriver.Driver, error) {
	return redisdriver.New(c, nil)
}

// eventually calls f every 20ms until it returns nil, and fails t with
// f's last error if that takes longer than max.
func eventually(t *testing.T, what string, max time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(max)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// parallelIfShort runs t beside the other such tests in the quick run: each
// starts a Redis Cluster of its own, which takes seconds. The full run
// keeps them apart.
func parallelIfShort(t *testing.T) {
	if !testflag.Long() {
		t.Parallel()
	}
}
