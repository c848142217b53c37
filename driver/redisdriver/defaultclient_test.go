package redisdriver_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// checkOnCaller fails t unless c saw a round trip starting with each of
// want, all on their callers' goroutines.
func (c *tripCounter) checkOnCaller(t *testing.T, want ...string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range want {
		if !slices.ContainsFunc(c.trips, func(s string) bool { return strings.HasPrefix(s, w) }) {
			t.Errorf("the client's hook did not see %q (saw %v)", w, c.trips)
		}
	}
	if len(c.detached) > 0 {
		t.Errorf("round trips %v ran on a goroutine of their own, not the caller's", c.detached)
	}
}

// defaultClient returns a go-redis client of addr made with default
// options (no ContextTimeoutEnabled), with a tripCounter, closed at t's
// cleanup.
func defaultClient(t *testing.T, addr string) (*redis.Client, *tripCounter) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	h := &tripCounter{}
	c.AddHook(h)
	return c, h
}

// TestDefaultOptionsClient: over a client made with default options, the
// driver's calls go through the client's hooks, on the caller's goroutine,
// and leave the client's options as they were.
func TestDefaultOptionsClient(t *testing.T) {
	c, h := defaultClient(t, realServer(t).Addr)
	d := newDriver(t, c)
	exercise(t, d, uniqueKey(t, "k"))
	h.checkOnCaller(t, "evalsha", "pipeline")
	if c.Options().ContextTimeoutEnabled {
		t.Error("New turned on ContextTimeoutEnabled in the client's options")
	}
}

// TestDefaultOptionsClientPausedServer: over a client made with default
// options (read timeout 3s), while a real redis-server is paused
// (SIGSTOP), every call returns by its context's deadline (600ms), on the
// caller's goroutine; after the server resumes the driver works again.
func TestDefaultOptionsClientPausedServer(t *testing.T) {
	srv := privateServer(t)
	c, h := defaultClient(t, srv.Addr)
	d := newDriver(t, c)
	l := mustAcquire(t, d, req(uniqueKey(t, "k"), owner(), driver.Exclusive, 30*time.Second))
	stallDefault(t, srv, d, l)
	h.checkOnCaller(t, "evalsha", "pipeline")
}

// reset forgets the round trips c saw.
func (c *tripCounter) reset() {
	c.mu.Lock()
	c.trips, c.detached = nil, nil
	c.mu.Unlock()
}

// defaultCluster returns a ClusterClient of the one-node cluster srv made
// with default options, with a tripCounter on the cluster client and one on
// each node client it creates, closed at t's cleanup.
func defaultCluster(t *testing.T, srv *testserver.Server) (c *redis.ClusterClient, cluster, nodes *tripCounter) {
	t.Helper()
	c = defaultClusterClient(t, srv.Addr)
	cluster, nodes = &tripCounter{}, &tripCounter{scripts: true}
	c.AddHook(cluster)
	c.OnNewNode(func(n *redis.Client) { n.AddHook(nodes) })
	return c, cluster, nodes
}

// defaultRing returns a Ring of one shard, srv, made with default options,
// with a tripCounter, closed at t's cleanup.
func defaultRing(t *testing.T, srv *testserver.Server) (*redis.Ring, *tripCounter) {
	t.Helper()
	c := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": srv.Addr}})
	t.Cleanup(func() { _ = c.Close() })
	h := &tripCounter{}
	c.AddHook(h)
	return c, h
}

// exercise makes each kind of call of d on key k: acquire, refresh (alone
// and in a batch), release.
func exercise(t *testing.T, d *redisdriver.Driver, k string) {
	t.Helper()
	l := mustAcquire(t, d, req(k, owner(), driver.Exclusive, 10*time.Second))
	if _, err := d.Refresh(ctxT(t), l); err != nil {
		t.Fatal(err)
	}
	for _, err := range d.RefreshBatch(ctxT(t), []driver.Lease{l}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Release(ctxT(t), l); err != nil {
		t.Fatal(err)
	}
}

// TestDefaultOptionsClusterClient: over a ClusterClient made with default
// options, once a first call has loaded the slot map (on a goroutine of
// its own), the driver's calls go through the cluster's hooks and the
// node clients' on the caller's goroutine, and leave the client's options
// as they were.
func TestDefaultOptionsClusterClient(t *testing.T) {
	parallelIfShort(t)
	c, cluster, nodes := defaultCluster(t, testserver.RedisCluster(t))
	d := newDriver(t, c)
	k := uniqueKey(t, "k")
	exercise(t, d, k) // loads the slot map
	cluster.reset()
	nodes.reset()
	exercise(t, d, k)
	cluster.checkOnCaller(t, "evalsha")
	nodes.checkOnCaller(t, "evalsha", "pipeline")
	if c.Options().ContextTimeoutEnabled {
		t.Error("New turned on ContextTimeoutEnabled in the client's options")
	}
}

// TestDefaultOptionsRing: over a Ring made with default options, every
// call of the driver goes through the ring's hooks on the caller's
// goroutine, the first one too.
func TestDefaultOptionsRing(t *testing.T) {
	c, h := defaultRing(t, realServer(t))
	d := newDriver(t, c)
	exercise(t, d, uniqueKey(t, "k"))
	h.checkOnCaller(t, "evalsha", "pipeline")
	if c.Options().ContextTimeoutEnabled {
		t.Error("New turned on ContextTimeoutEnabled in the client's options")
	}
}

// TestDefaultOptionsClusterPausedServer: over a ClusterClient made with
// default options (read timeout 5s), while the cluster's one node is
// paused (SIGSTOP), every call returns by its context's deadline (600ms),
// on the caller's goroutine; after the node resumes the driver works
// again.
func TestDefaultOptionsClusterPausedServer(t *testing.T) {
	srv := testserver.RedisCluster(t)
	c, cluster, nodes := defaultCluster(t, srv)
	d := newDriver(t, c)
	k := uniqueKey(t, "k")
	l := mustAcquire(t, d, req(k, owner(), driver.Exclusive, 30*time.Second)) // loads the slot map
	cluster.reset()
	nodes.reset()
	stallDefault(t, srv, d, l)
	cluster.checkOnCaller(t, "evalsha")
	nodes.checkOnCaller(t, "evalsha", "pipeline")
}

// TestDefaultOptionsRingPausedServer is TestDefaultOptionsClusterPausedServer
// over a Ring of one shard (read timeout 3s).
func TestDefaultOptionsRingPausedServer(t *testing.T) {
	srv := privateServer(t)
	c, h := defaultRing(t, srv)
	d := newDriver(t, c)
	k := uniqueKey(t, "k")
	l := mustAcquire(t, d, req(k, owner(), driver.Exclusive, 30*time.Second))
	stallDefault(t, srv, d, l)
	h.checkOnCaller(t, "evalsha", "pipeline")
}

// stallDefault pauses srv, checks that d's calls on l's key that go
// through the client's hooks return by their deadlines, resumes srv, and
// waits until l can be refreshed, then releases it.
func stallDefault(t *testing.T, srv *testserver.Server, d *redisdriver.Driver, l driver.Lease) {
	t.Helper()
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	calls := allCalls(d, l, l.Key+"/fresh")
	drivertest.CheckStalled(t, calls[:4]) // the calls that go through the client's hooks
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Refresh after the pause", 10*time.Second, func() error {
		_, err := d.Refresh(ctxT(t), l)
		return err
	})
	if err := d.Release(ctxT(t), l); err != nil {
		t.Fatal(err)
	}
}
