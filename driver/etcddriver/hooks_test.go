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
	needServer(t)
	p := faultproxy.ForTest(t, strings.TrimPrefix(server.ClientURL, "http://"))
	c := newEtcdClient(t, "http://"+p.Addr())
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

// closedBound is how soon a call on a driver whose client is closed must
// fail; an Acquire under way when the client is closed gets closedWaitBound.
const (
	closedBound     = 100 * time.Millisecond
	closedWaitBound = time.Second
)
