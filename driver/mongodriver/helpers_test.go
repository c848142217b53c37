package mongodriver_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/mongodriver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/faultproxy"
	"github.com/go-locker/locker/internal/ferrettest"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// server returns the package's shared FerretDB or skips t.
func server(t *testing.T) *ferrettest.Server {
	t.Helper()
	if sharedServer == nil {
		ferrettest.SkipOrFail(t, sharedServerErr)
	}
	return sharedServer
}

// fixtures records the client and fault proxy of each driver newDriver
// made, for the hooks closeClient and stall.
var fixtures drivertest.Made[*mongo.Client]

// connect returns a client of uri that talks to one server directly,
// with timeouts short enough for tests, disconnected at t's cleanup.
func connect(t testing.TB, uri string) *mongo.Client {
	t.Helper()
	c, err := mongo.Connect(clientOptions(uri))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	return c
}

func clientOptions(uri string) *options.ClientOptions {
	return options.Client().ApplyURI(uri).SetDirect(true).
		SetServerSelectionTimeout(5 * time.Second).
		SetConnectTimeout(2 * time.Second)
}

// proxied returns uri's server address behind a fault proxy of t's.
func proxied(t *testing.T, srv *ferrettest.Server) (*faultproxy.Proxy, string) {
	t.Helper()
	if srv.Addr == "" {
		return nil, srv.URI // an external server: no proxy
	}
	p := faultproxy.ForTest(t, srv.Addr)
	return p, "mongodb://" + p.Addr() + "/"
}

// newDriver returns a driver on a collection of t's own, with a client of
// its own that reaches the server through a fault proxy of its own, as a
// separate process would; all are closed at t's cleanup.
func newDriver(t *testing.T, srv *ferrettest.Server) *mongodriver.Driver {
	t.Helper()
	return newDriverOn(t, srv, database(t))
}

// newDriverOn is newDriver on the named database.
func newDriverOn(t *testing.T, srv *ferrettest.Server, db string) *mongodriver.Driver {
	t.Helper()
	p, uri := proxied(t, srv)
	c := connect(t, uri)
	d, err := mongodriver.New(c, &mongodriver.Options{Database: db})
	if err != nil {
		t.Fatal(err)
	}
	if p != nil {
		fixtures.Add(t, d, c, p)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// database returns the name of t's database: the drivers of one test
// share it, and tests do not see each other's. FerretDB over SQLite scans
// the whole collection for every read (it uses no index for them) and
// keeps a database in one file that takes one writer at a time, so a
// database per test keeps parallel tests from slowing each other down.
func database(t *testing.T) string {
	sum := sha256.Sum256([]byte(t.Name()))
	return "t_" + hex.EncodeToString(sum[:8])
}

// closeClient disconnects d's client: afterwards every call of d returns
// an error marked driver.Permanent. It is the close hook of lockertest.
func closeClient(t *testing.T, d driver.Driver) {
	t.Helper()
	f := fixtures.Of(t, d)
	if err := f.Client.Disconnect(context.Background()); err != nil {
		t.Errorf("Disconnect: %v", err)
	}
}

// stall makes the server stop answering d: its fault proxy swallows every
// byte, sockets open. It is the stall hook of lockertest.
func stall(t *testing.T, d driver.Driver) (resume func()) {
	t.Helper()
	return fixtures.Stall(t, d)
}

func owner() string { return drivertest.Owner() }

func ctxT(t *testing.T) context.Context { return drivertest.Context(t, 20*time.Second) }

func req(key, owner string, ttl time.Duration) driver.Request {
	return driver.Request{Key: key, Owner: owner, Mode: driver.Exclusive, TTL: ttl}
}

// locks returns the lock collection of database db through a client of
// its own, without a driver.
func locks(t *testing.T, srv *ferrettest.Server, db string) *mongo.Collection {
	t.Helper()
	return connect(t, srv.URI).Database(db).Collection(mongodriver.DefaultCollection)
}
