package quorumdriver_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/quorumdriver"
	"github.com/go-locker/locker/internal/faultproxy"
	"github.com/go-locker/locker/internal/testserver"
	"github.com/go-locker/locker/lockertest"
	"github.com/redis/go-redis/v9"
)

// poolAddrs returns the addresses of the first n servers of the shared
// pool, skipping t (or failing it, with LOCKER_REQUIRE_SERVERS=1) when
// there is none.
func poolAddrs(t testing.TB, n int) []string {
	t.Helper()
	if pool == nil {
		testserver.SkipOrFail(t, poolErr)
	}
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = pool[i].Addr
	}
	return addrs
}

// privateServers starts n redis-servers of t's own, to kill or restart.
func privateServers(t *testing.T, n int) []*testserver.Server {
	t.Helper()
	ss := make([]*testserver.Server, n)
	for i := range ss {
		ss[i] = testserver.PrivateRedis(t)
	}
	return ss
}

// madeRedis is what redisQuorum made for one quorum driver: each member's
// client and the fault proxy in front of it.
type madeRedis struct {
	clients []*redis.Client
	proxies []*faultproxy.Proxy
}

var redisMade sync.Map // *quorumdriver.Driver -> madeRedis

// memberClient returns a go-redis client for one member: every call
// bounded by its context, no retries (the front-end retries with the same
// owner), short dial and I/O timeouts so that a dead member costs little.
func memberClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
}

// redisQuorum returns a quorum driver over the servers at addrs, each
// member with a client of its own behind a fault proxy of its own.
func redisQuorum(t *testing.T, addrs []string, opts *quorumdriver.Options) driver.Driver {
	t.Helper()
	var m madeRedis
	clients := make([]redis.UniversalClient, len(addrs))
	for i, a := range addrs {
		p := faultproxy.ForTest(t, a)
		c := memberClient(p.Addr())
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
		m.clients = append(m.clients, c)
		m.proxies = append(m.proxies, p)
	}
	d, err := quorumdriver.NewRedis(clients, opts)
	if err != nil {
		t.Fatal(err)
	}
	redisMade.Store(d, m)
	return d
}

func madeOf(t *testing.T, d driver.Driver) madeRedis {
	t.Helper()
	v, ok := redisMade.Load(d)
	if !ok {
		t.Fatalf("driver %T not made by redisQuorum", d)
	}
	return v.(madeRedis)
}

// redisCloseClient closes every member client of d: the hook for
// lockertest's WithCloseClient.
func redisCloseClient(t *testing.T, d driver.Driver) {
	for _, c := range madeOf(t, d).clients {
		_ = c.Close()
	}
}

// redisStall black-holes every member proxy of d: the hook for
// lockertest's WithStall. resume heals them and resets their connections.
func redisStall(t *testing.T, d driver.Driver) (resume func()) {
	ps := madeOf(t, d).proxies
	for _, p := range ps {
		p.Blackhole(true)
	}
	return func() {
		for _, p := range ps {
			p.Heal()
			p.Reset()
		}
	}
}

// TestConformanceRedis runs the lockertest suite against quorums of
// redis-servers behind fault proxies (quorumSizes).
func TestConformanceRedis(t *testing.T) {
	for _, n := range quorumSizes() {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			t.Parallel()
			addrs := poolAddrs(t, n)
			lockertest.TestDriver(t, func(t *testing.T) driver.Driver { return redisQuorum(t, addrs, nil) },
				lockertest.WithCloseClient(redisCloseClient), lockertest.WithStall(redisStall))
		})
	}
}

// ctxT returns a context that ends with t or after a minute.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
