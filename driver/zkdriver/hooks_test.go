package zkdriver_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/zkdriver"
	"github.com/go-locker/locker/internal/faultproxy"
	"github.com/go-zookeeper/zk"
)

// proxies maps the drivers made by newProxiedDriver to their fault proxy.
var proxies sync.Map // *zkdriver.Driver -> *faultproxy.Proxy

// newProxiedDriver returns a driver over a connection of its own (a 10s
// session) that reaches the shared server through a fault proxy of its
// own; both are closed at t's cleanup.
func newProxiedDriver(t testing.TB, sessionTimeout time.Duration) *zkdriver.Driver {
	t.Helper()
	return newProxiedDriverOpts(t, sessionTimeout, nil)
}

// newProxiedDriverOpts is newProxiedDriver with options.
func newProxiedDriverOpts(t testing.TB, sessionTimeout time.Duration, opts *zkdriver.Options) *zkdriver.Driver {
	t.Helper()
	p := faultproxy.ForTest(t, server(t).Addr)
	d := connect(t, []string{p.Addr()}, sessionTimeout, opts)
	proxies.Store(d, p)
	t.Cleanup(func() { proxies.Delete(d) })
	return d
}

// closeClient closes the ZooKeeper connection under d, a driver made by
// connect: the hook for lockertest.WithCloseClient.
func closeClient(t *testing.T, d driver.Driver) {
	t.Helper()
	d.(*zkdriver.Driver).Conn().Close()
}

// stall makes ZooKeeper stop answering d, a driver made by
// newProxiedDriver, by partitioning its proxy (its connection stays open,
// its bytes are held back, new connections are refused), until resume is
// called: the hook for lockertest.WithStall. A stall longer than two thirds
// of the session timeout makes go-zookeeper drop the connection, and one
// longer than the session timeout ends the session.
func stall(t *testing.T, d driver.Driver) (resume func()) {
	t.Helper()
	zd, _ := d.(*zkdriver.Driver)
	v, ok := proxies.Load(zd)
	if !ok {
		t.Fatalf("%T %p was not made by newProxiedDriver", d, d)
	}
	p := v.(*faultproxy.Proxy)
	p.Partition(true)
	var once sync.Once
	resume = func() { once.Do(func() { p.Partition(false) }) }
	t.Cleanup(resume)
	return resume
}

// waitNodes waits until key's queue on the shared server has n lock
// nodes, as admin lists them.
func waitNodes(t *testing.T, admin *zk.Conn, key string, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		names, _, err := admin.Children(zkdriver.ParentPath(zkdriver.DefaultRoot, key))
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			t.Fatal(err)
		}
		got := len(zkdriver.LockNodes(names))
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q has %d lock nodes after %v; want %d", key, got, within, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A hookCall is one of the driver's calls, made by TestClosedConn and
// TestStalled.
type hookCall struct {
	name string
	call func(context.Context) error
}

// hookTTL is the lease of the holds in TestClosedConn and TestStalled.
const hookTTL = 5 * time.Second

// hookSetup returns a driver made by newProxiedDriver (10s sessions) that
// holds a key (held), and a key k2 that another driver holds until t ends,
// with that driver's connection to look at the server.
func hookSetup(t *testing.T) (d *zkdriver.Driver, held driver.Lease, k2 string, admin *zk.Conn) {
	t.Helper()
	d, other := newProxiedDriver(t, 10*time.Second), newDriver(t)
	k1, k2 := uniqueKey(t, "held"), uniqueKey(t, "contended")
	held = mustAcquire(t, d, req(k1, owner(), driver.Exclusive, hookTTL))
	blocker := mustAcquire(t, other, req(k2, owner(), driver.Exclusive, hookTTL))
	t.Cleanup(func() { _ = other.Release(ctxT(t), blocker) })
	return d, held, k2, other.Conn()
}

// hookCalls returns every call of d's: on held, on k2 (which another
// driver holds) and on a key nobody holds.
func hookCalls(t *testing.T, d *zkdriver.Driver, held driver.Lease, k2 string) []hookCall {
	fresh := uniqueKey(t, "fresh")
	acquire := func(f func(context.Context, driver.Request) (driver.Lease, error), key string, m driver.Mode) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := f(ctx, req(key, owner(), m, hookTTL))
			return err
		}
	}
	return []hookCall{
		{"TryAcquire", acquire(d.TryAcquire, fresh, driver.Exclusive)},
		{"Acquire", acquire(d.Acquire, k2, driver.Shared)},
		{"Refresh", func(ctx context.Context) error { _, err := d.Refresh(ctx, held); return err }},
		{"RefreshBatch", func(ctx context.Context) error { return errors.Join(d.RefreshBatch(ctx, []driver.Lease{held})...) }},
		{"Release", func(ctx context.Context) error { return d.Release(ctx, held) }},
	}
}

// closedBound is how soon a call on a driver whose connection is closed
// must fail; an Acquire under way when the connection is closed, and the
// loss of a hold, get closedWaitBound.
const (
	closedBound     = 100 * time.Millisecond
	closedWaitBound = time.Second
)

// TestClosedBeforeSession: on a connection closed while it could not
// connect (it sends no close request), Session.Wait and the driver's calls
// fail at once with a permanent error.
func TestClosedBeforeSession(t *testing.T) {
	srv := server(t)
	p := faultproxy.ForTest(t, srv.Addr)
	p.Partition(true) // connections are accepted and closed at once
	// The second connection attempt comes after go-zookeeper's pause of a
	// second, during which the connection is closed.
	attempts := make(chan struct{}, 16)
	sess := &zkdriver.Session{OnEvent: func(ev zk.Event) {
		if ev.Type == zk.EventSession && ev.State == zk.StateConnecting {
			attempts <- struct{}{}
		}
	}}
	conn, _, err := zk.Connect([]string{p.Addr()}, 10*time.Second, quiet(t), sess.ConnOption())
	if err != nil {
		t.Fatal(err)
	}
	d, err := zkdriver.New(conn, sess, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	waiting := make(chan error, 1)
	go func() { waiting <- sess.Wait(context.Background()) }()
	<-attempts
	<-attempts
	conn.Close()
	select {
	case err := <-waiting:
		if !driver.IsPermanent(err) || !errors.Is(err, zk.ErrClosing) {
			t.Errorf("Session.Wait on a closed connection = %v; want a permanent error wrapping zk.ErrClosing", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Session.Wait did not return within 5s of the connection's close")
	}
	if _, err := d.TryAcquire(ctxT(t), req(uniqueKey(t, "k"), owner(), driver.Exclusive, time.Second)); !driver.IsPermanent(err) {
		t.Errorf("TryAcquire on a closed connection = %v; want a permanent error", err)
	}
}
