package natsdriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/natsdriver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/faultproxy"
	"github.com/go-locker/locker/internal/natstest"
	"github.com/go-locker/locker/internal/proc"
	"github.com/nats-io/nats.go"
)

// server returns the package's shared nats-server or skips t.
func server(t *testing.T) *natstest.Server {
	t.Helper()
	if sharedServer == nil {
		proc.SkipOrFail(t, "natsdriver", sharedServerErr, natstest.ErrNotInstalled)
	}
	return sharedServer
}

// fixtures records the connection and fault proxy of each driver
// newDriver made, for the hooks closeClient and stall.
var fixtures drivertest.Made[*nats.Conn]

// connect connects to url the way the tests' clients do: reconnecting at
// once, without end, after a broken connection (a fault proxy's reset).
func connect(url string) (*nats.Conn, error) {
	return nats.Connect(url,
		nats.ReconnectWait(20*time.Millisecond), nats.ReconnectJitter(0, 0),
		nats.MaxReconnects(-1), nats.Timeout(time.Second))
}

// newDriver returns a driver with a connection of its own that reaches
// the server at addr through a fault proxy of its own, as a separate
// process would; both are closed at t's cleanup. opts may be nil.
func newDriver(t *testing.T, addr string, opts *natsdriver.Options) *natsdriver.Driver {
	t.Helper()
	p := faultproxy.ForTest(t, addr)
	nc, err := connect("nats://" + p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	d, err := natsdriver.NewConn(ctxT(t), nc, opts)
	if err != nil {
		t.Fatal(err)
	}
	fixtures.Add(t, d, nc, p)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// closeClient closes the connection of d: afterwards every call of d
// returns at once an error marked driver.Permanent. It is the close hook
// of lockertest.
func closeClient(t *testing.T, d driver.Driver) {
	t.Helper()
	fixtures.Of(t, d).Client.Close()
}

// stall makes the server stop answering d: its fault proxy swallows every
// byte, sockets open. It is the stall hook of lockertest.
func stall(t *testing.T, d driver.Driver) (resume func()) {
	t.Helper()
	return fixtures.Stall(t, d)
}

// owner returns a fresh owner string of 32 hex digits.
func owner() string { return drivertest.Owner() }

// uniqueKey returns a lock key not used by any other test on the shared
// server.
func uniqueKey(t *testing.T) string { return t.Name() + "/" + owner() }

func ctxT(t *testing.T) context.Context { return drivertest.Context(t, 20*time.Second) }

func req(key, owner string, ttl time.Duration) driver.Request {
	return driver.Request{Key: key, Owner: owner, Mode: driver.Exclusive, TTL: ttl}
}

func mustAcquire(t *testing.T, d driver.Driver, r driver.Request) driver.Lease {
	t.Helper()
	return drivertest.MustAcquire(ctxT(t), t, d, r, r.TTL)
}
