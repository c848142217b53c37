package zkdriver_test

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/zkdriver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/testflag"
	"github.com/go-locker/locker/internal/zktest"
	"github.com/go-zookeeper/zk"
)

// server returns the package's shared ZooKeeper server or skips t.
func server(t testing.TB) *zktest.Server {
	t.Helper()
	if zkServer == nil {
		zktest.SkipOrFail(t, zkErr)
	}
	return zkServer
}

// testLogger sends go-zookeeper's log to t when LOCKER_ZK_LOG=1.
type testLogger struct{ t testing.TB }

func (l testLogger) Printf(format string, args ...any) {
	if os.Getenv(zktest.EnvLog) == "1" {
		l.t.Logf("zk: "+format, args...)
	}
}

// quiet is a go-zookeeper option that keeps its log out of the output.
func quiet(t testing.TB) func(*zk.Conn) {
	return func(c *zk.Conn) {
		zk.WithLogger(testLogger{t})(c)
		zk.WithLogInfo(false)(c)
	}
}

// connect returns a driver over a new connection to addrs, closed at t's
// cleanup.
func connect(t testing.TB, addrs []string, sessionTimeout time.Duration, opts *zkdriver.Options, zkOpts ...func(*zk.Conn)) *zkdriver.Driver {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := zkdriver.Connect(ctx, addrs, sessionTimeout, opts, append([]func(*zk.Conn){quiet(t)}, zkOpts...)...)
	if err != nil {
		t.Fatalf("zkdriver.Connect(%v): %v", addrs, err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// newDriver returns a driver over a new connection to the shared server,
// with a 10s session.
func newDriver(t testing.TB) *zkdriver.Driver {
	t.Helper()
	return connect(t, []string{server(t).Addr}, 10*time.Second, nil)
}

// owner returns a fresh owner string of 32 hex digits.
func owner() string { return drivertest.Owner() }

// keySeq numbers the keys of plainKey.
var keySeq atomic.Uint64

// uniqueKey returns a lock key not used by any other test on the shared
// server.
func uniqueKey(t testing.TB, name string) string { return drivertest.UniqueKey(t, name) }

func ctxT(t testing.TB) context.Context { return drivertest.Context(t, 30*time.Second) }

func req(key, owner string, mode driver.Mode, ttl time.Duration) driver.Request {
	return driver.Request{Key: key, Owner: owner, Mode: mode, TTL: ttl}
}

func mustAcquire(t testing.TB, d driver.Driver, r driver.Request) driver.Lease {
	t.Helper()
	return drivertest.MustAcquire(ctxT(t), t, d, r, r.TTL)
}

// conformanceSession is the session timeout of the conformance suite's
// connections: its longest leases are this long.
const conformanceSession = 10 * time.Second

// acquireBehind starts d.Acquire(r) in a goroutine, waits until its node
// is in the queue (as conn sees it), and returns the channel that receives
// the lease (the zero Lease if Acquire failed, which fails t).
func acquireBehind(t *testing.T, d *zkdriver.Driver, conn *zk.Conn, r driver.Request) <-chan driver.Lease {
	t.Helper()
	got := make(chan driver.Lease, 1)
	go func() {
		l, err := d.Acquire(ctxT(t), r)
		if err != nil {
			t.Errorf("Acquire %.8s…: %v", r.Owner, err)
		}
		got <- l
	}()
	waitFor(t, 10*time.Second, "the waiter's node", func() bool { return nodeOf(t, conn, r.Key, r.Owner) != "" })
	return got
}

// grant is a lease that the waiter numbered i got.
type grant struct {
	i int
	l driver.Lease
}

// waiters collects the grants of Acquires queued in turn.
type waiters struct {
	t  *testing.T
	ch chan grant
}

func newWaiters(t *testing.T) *waiters { return &waiters{t, make(chan grant, 16)} }

// queue starts waiter i's Acquire of r on d, and waits until its node is
// in the queue (as conn sees it).
func (w *waiters) queue(i int, d *zkdriver.Driver, conn *zk.Conn, r driver.Request) {
	w.t.Helper()
	got := acquireBehind(w.t, d, conn, r)
	go func() { w.ch <- grant{i, <-got} }()
}

// none checks that no waiter is granted for a while.
func (w *waiters) none() {
	w.t.Helper()
	select {
	case g := <-w.ch:
		w.t.Fatalf("waiter %d granted out of turn", g.i)
	case <-time.After(200 * time.Millisecond):
	}
}

// next returns the next grant.
func (w *waiters) next() grant {
	w.t.Helper()
	select {
	case g := <-w.ch:
		return g
	case <-time.After(10 * time.Second):
		w.t.Fatal("no grant")
	}
	panic("unreachable")
}

// parallelIfShort runs t beside the other such tests under -short. These
// tests wait for sessions and partitions through faultproxies of their
// own; the full run keeps them apart, so that their timing is judged on a
// quieter machine.
func parallelIfShort(t *testing.T) {
	if !testflag.Long() {
		t.Parallel()
	}
}
