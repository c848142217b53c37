package etcddriver_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/etcddriver"
	"github.com/go-locker/locker/internal/etcdtest"
	"github.com/go-locker/locker/internal/faultproxy"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A proxied driver talks to the shared server through a fault proxy of its
// own, so that closeClient and stall can act on it alone.
type proxied struct {
	client *clientv3.Client
	proxy  *faultproxy.Proxy
}

// proxiedDrivers maps the drivers made by newProxiedDriver to their client
// and proxy.
var proxiedDrivers sync.Map // *etcddriver.Driver -> proxied

// newProxiedDriver returns a driver over a client of its own that reaches
// the shared server through a fault proxy of its own; the driver, client
// and proxy are closed at t's cleanup.
func newProxiedDriver(t testing.TB) *etcddriver.Driver {
	t.Helper()
	p := faultproxy.ForTest(t, strings.TrimPrefix(server.ClientURL, "http://"))
	c := etcdtest.NewClient(t, "http://"+p.Addr())
	d := newDriverOn(t, c, nil)
	proxiedDrivers.Store(d, proxied{client: c, proxy: p})
	t.Cleanup(func() { proxiedDrivers.Delete(d) })
	return d
}

func proxiedOf(t testing.TB, d driver.Driver) proxied {
	t.Helper()
	ed, _ := d.(*etcddriver.Driver)
	p, ok := proxiedDrivers.Load(ed)
	if !ok {
		t.Fatalf("%T %p was not made by newProxiedDriver", d, d)
	}
	return p.(proxied)
}

// closeClient closes the etcd client under d, a driver made by
// newProxiedDriver: the hook for lockertest.WithCloseClient.
func closeClient(t *testing.T, d driver.Driver) {
	t.Helper()
	if err := proxiedOf(t, d).client.Close(); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("closing the etcd client: %v", err)
	}
}

// stall makes etcd stop answering d, a driver made by newProxiedDriver, by
// partitioning its proxy (its connections stay open, their bytes are held
// back, new connections are refused), until resume is called: the hook for
// lockertest.WithStall.
func stall(t *testing.T, d driver.Driver) (resume func()) {
	t.Helper()
	p := proxiedOf(t, d).proxy
	p.Partition(true)
	var once sync.Once
	resume = func() { once.Do(func() { p.Partition(false) }) }
	t.Cleanup(resume)
	return resume
}

// A hookCall is one of the driver's calls, made by TestClosedClient and
// TestStalled.
type hookCall struct {
	name string
	call func(context.Context) error
}

// hookTTL is the lease of the holds in TestClosedClient and TestStalled.
const hookTTL = 5 * time.Second

// hookSetup returns a driver made by newProxiedDriver that holds a key
// (held), and a key k2 that another driver holds until t ends.
func hookSetup(t *testing.T) (d *etcddriver.Driver, held driver.Lease, k2 string) {
	t.Helper()
	d, other := newProxiedDriver(t), newDriver(t)
	k1, k2 := uniqueKey(t, "held"), uniqueKey(t, "contended")
	held = mustAcquire(t, d, req(k1, owner(), driver.Exclusive, hookTTL))
	blocker := mustAcquire(t, other, req(k2, owner(), driver.Exclusive, hookTTL))
	t.Cleanup(func() { _ = other.Release(ctxT(t), blocker) })
	return d, held, k2
}

// hookCalls returns every call of d's: on held, on k2 (which another
// driver holds) and on a key nobody holds.
func hookCalls(t *testing.T, d *etcddriver.Driver, held driver.Lease, k2 string) []hookCall {
	fresh := uniqueKey(t, "fresh")
	acquire := func(f func(context.Context, driver.Request) (driver.Lease, error), key string, m driver.Mode) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := f(ctx, req(key, owner(), m, hookTTL))
			return err
		}
	}
	return []hookCall{
		{"TryAcquire", acquire(d.TryAcquire, fresh, driver.Exclusive)},
		{"TryAcquireQueued", acquire(d.TryAcquireQueued, k2, driver.Exclusive)},
		{"Acquire", acquire(d.Acquire, k2, driver.Shared)},
		{"Refresh", func(ctx context.Context) error { _, err := d.Refresh(ctx, held); return err }},
		{"RefreshBatch", func(ctx context.Context) error { return errors.Join(d.RefreshBatch(ctx, []driver.Lease{held})...) }},
		{"Release", func(ctx context.Context) error { return d.Release(ctx, held) }},
		{"Subscribe", func(ctx context.Context) error {
			s, err := d.Subscribe(ctx, fresh)
			if err == nil {
				s.Close()
			}
			return err
		}},
	}
}

// closedBound is how soon a call on a driver whose client is closed must
// fail; an Acquire under way when the client is closed gets closedWaitBound.
const (
	closedBound     = 100 * time.Millisecond
	closedWaitBound = time.Second
)

// TestClosedClient closes the etcd client under a driver that holds a key,
// waits in a queue and is subscribed to a key: the waiting Acquire fails
// with a permanent error at once, the subscription is woken, and every
// call afterwards fails with a permanent error without retrying, within
// closedBound. No goroutine is left behind (TestMain checks).
func TestClosedClient(t *testing.T) {
	d, held, k2 := hookSetup(t)
	sub, err := d.Subscribe(ctxT(t), k2)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	stop := d.WatchLoss(held, func(error) {})
	defer stop()
	waiting := make(chan error, 1)
	go func() {
		_, err := d.Acquire(context.Background(), req(k2, owner(), driver.Exclusive, hookTTL))
		waiting <- err
	}()
	waitEntries(t, newClient(t), k2, 2)

	closeClient(t, d)
	closed := time.Now()
	select {
	case err := <-waiting:
		t.Logf("the waiting Acquire returned %v after the close: %v", time.Since(closed).Round(time.Microsecond), err)
		if !driver.IsPermanent(err) {
			t.Errorf("the waiting Acquire returned %v; want a permanent error", err)
		}
	case <-time.After(closedWaitBound):
		t.Fatalf("the waiting Acquire did not return within %v of the close", closedWaitBound)
	}
	select {
	case <-sub.C():
	case <-time.After(closedWaitBound):
		t.Errorf("the subscription was not woken within %v of the close", closedWaitBound)
	}
	for _, c := range hookCalls(t, d, held, k2) {
		start := time.Now()
		err := c.call(ctxT(t))
		took := time.Since(start)
		t.Logf("%s after the close: %v, %v", c.name, took.Round(time.Microsecond), err)
		if !driver.IsPermanent(err) {
			t.Errorf("%s after the client was closed = %v; want a permanent error", c.name, err)
		}
		if took > closedBound {
			t.Errorf("%s after the client was closed took %v; want at most %v", c.name, took, closedBound)
		}
	}
}

// stallDeadline is the context deadline of the calls made while etcd
// does not answer, and stallBound how soon they must return.
const (
	stallDeadline = 600 * time.Millisecond
	stallBound    = 650 * time.Millisecond
)

// TestStalled makes etcd stop answering a driver that holds a key and
// waits in a queue: every call (hookCalls, and an Acquire that was queued
// before) with a deadline of stallDeadline returns by stallBound with an
// error wrapping context.DeadlineExceeded. Once etcd answers again, the
// queued waiter's entry is gone and the driver works.
func TestStalled(t *testing.T) {
	d, held, k2 := hookSetup(t)
	type result struct {
		name string
		took time.Duration
		err  error
	}
	results := make(chan result, 16)
	run := func(c hookCall) {
		ctx, cancel := context.WithTimeout(context.Background(), stallDeadline)
		defer cancel()
		start := time.Now()
		err := c.call(ctx)
		results <- result{c.name, time.Since(start), err}
	}
	// A waiter queued before the stall: its deadline passes during it.
	go run(hookCall{"Acquire (queued before the stall)", func(ctx context.Context) error {
		_, err := d.Acquire(ctx, req(k2, owner(), driver.Exclusive, hookTTL))
		return err
	}})
	admin := newClient(t)
	waitEntries(t, admin, k2, 2)
	resume := stall(t, d)
	calls := hookCalls(t, d, held, k2)
	for _, c := range calls {
		go run(c)
	}
	for range len(calls) + 1 {
		r := <-results
		t.Logf("%s while etcd does not answer: %v, %v", r.name, r.took.Round(time.Millisecond), r.err)
		if !errors.Is(r.err, context.DeadlineExceeded) {
			t.Errorf("%s while etcd does not answer = %v; want an error wrapping context.DeadlineExceeded", r.name, r.err)
		}
		if r.took > stallBound {
			t.Errorf("%s with a %v deadline returned after %v; want at most %v", r.name, stallDeadline, r.took, stallBound)
		}
	}

	resume()
	// The queued waiter's entry goes once etcd answers; the released
	// hold's entry (its Delete was lost to the deadline) goes with its
	// lease, which the driver no longer renews.
	waitEntries(t, admin, k2, 1)
	l := mustAcquire(t, d, req(uniqueKey(t, "after"), owner(), driver.Exclusive, hookTTL))
	if err := d.Release(ctxT(t), l); err != nil {
		t.Errorf("Release after the stall: %v", err)
	}
}
