package memcachedriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memcachedriver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/faultproxy"
	"github.com/go-locker/locker/internal/memcachedtest"
)

// clientTimeout is the gomemcache Timeout of the tests' clients: longer
// than the 600ms deadlines of the stall hook's calls, so that those end by
// their context rather than by a socket timeout.
const clientTimeout = time.Second

// server returns the package's shared memcached or skips t.
func server(t *testing.T) *memcachedtest.Server {
	t.Helper()
	if sharedServer == nil {
		memcachedtest.SkipOrFail(t, sharedServerErr)
	}
	return sharedServer
}

// fixtures records the client and fault proxy of each driver newDriver
// made, for the hooks closeClient and stall.
var fixtures drivertest.Made[*memcache.Client]

// newClient returns a client of addr, closed at t's cleanup.
func newClient(t *testing.T, addr string) *memcache.Client {
	t.Helper()
	c := memcache.New(addr)
	c.Timeout = clientTimeout
	c.MaxIdleConns = 16
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newDriver returns a driver with a client of its own that reaches the
// server at addr through a fault proxy of its own, as a separate process
// would; both are closed at t's cleanup.
func newDriver(t *testing.T, addr string) *memcachedriver.Driver {
	t.Helper()
	p := faultproxy.ForTest(t, addr)
	c := newClient(t, p.Addr())
	d, err := memcachedriver.New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	fixtures.Add(t, d, c, p)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// closeClient closes the driver d and its client: afterwards every call of
// d returns at once an error marked driver.Permanent. (gomemcache's own
// Client.Close only drops idle connections and leaves the client usable,
// so the driver's Close is what ends it.) It is the close hook of
// lockertest.
func closeClient(t *testing.T, d driver.Driver) {
	t.Helper()
	f := fixtures.Of(t, d)
	if err := d.(*memcachedriver.Driver).Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := f.Client.Close(); err != nil {
		t.Errorf("client Close: %v", err)
	}
}

// stall makes memcached stop answering d: its fault proxy swallows every
// byte, sockets open. The function it returns ends the stall, and resets
// the proxy's connections, whose streams the swallowed bytes have torn.
// It is the stall hook of lockertest.
func stall(t *testing.T, d driver.Driver) (resume func()) {
	t.Helper()
	return fixtures.Stall(t, d)
}

// owner returns a fresh owner string of 32 hex digits.
func owner() string { return drivertest.Owner() }

// uniqueKey returns a lock key not used by any other test on the shared
// server.
func uniqueKey(t *testing.T) string {
	return t.Name() + "/" + owner()
}

func ctxT(t *testing.T) context.Context { return drivertest.Context(t, 20*time.Second) }

func req(key, owner string, ttl time.Duration) driver.Request {
	return driver.Request{Key: key, Owner: owner, Mode: driver.Exclusive, TTL: ttl}
}

func mustAcquire(t *testing.T, d driver.Driver, r driver.Request) driver.Lease {
	t.Helper()
	return drivertest.MustAcquire(ctxT(t), t, d, r, r.TTL)
}
