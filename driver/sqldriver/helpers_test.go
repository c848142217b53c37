package sqldriver_test

import (
	"context"
	"database/sql"
	sqldrv "database/sql/driver"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/sqldriver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/faultproxy"
	"github.com/go-locker/locker/internal/sqltest"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/stdlib"
)

// backend is one of the databases the tests run against.
type backend struct {
	name  string
	srv   *sqltest.Server
	plain bool // see plainPostgres
}

// forEachBackend runs f as a subtest against PostgreSQL and MariaDB, each
// skipped (or failed, see sqltest.SkipOrFail) when its server is missing.
func forEachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	t.Helper()
	eachBackend(t, false, f)
}

// forEachBackendParallel is forEachBackend with the two subtests running
// at once: for tests that mostly wait and that touch nothing outside
// their own server (each backend has a server of its own), such as those
// that kill the server's connections.
func forEachBackendParallel(t *testing.T, f func(t *testing.T, b backend)) {
	t.Helper()
	eachBackend(t, true, f)
}

func eachBackend(t *testing.T, parallel bool, f func(t *testing.T, b backend)) {
	t.Helper()
	for _, b := range []struct {
		name string
		srv  *sqltest.Server
		err  error
	}{
		{"postgres", pgServer, pgServerErr},
		{"mariadb", myServer, myServerErr},
	} {
		t.Run(b.name, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			if b.srv == nil {
				sqltest.SkipOrFail(t, b.err)
			}
			f(t, backend{name: b.name, srv: b.srv})
		})
	}
}

// dialect returns b's SQL dialect.
func (b backend) dialect() sqldriver.Dialect {
	if b.name == "mariadb" {
		return sqldriver.MySQL
	}
	return sqldriver.PostgreSQL
}

// plainPostgres is PostgreSQL through a database/sql driver that the
// package does not know as pgx's: it takes the portable path (a
// database/sql transaction per acquire, no LISTEN), as with lib/pq.
func plainPostgres(t *testing.T) backend {
	t.Helper()
	if pgServer == nil {
		sqltest.SkipOrFail(t, pgServerErr)
	}
	return backend{name: "postgres", srv: pgServer, plain: true}
}

// plainConnector hides pgx's driver type from sqldriver's detection.
type plainConnector struct{ sqldrv.Connector }

func (c plainConnector) Driver() sqldrv.Driver { return plainDriver{c.Connector.Driver()} }

type plainDriver struct{ sqldrv.Driver }

// openDB opens a new pool on s. MySQL connections interpolate parameters
// on the client, so that a statement takes one round trip rather than a
// prepare, an execute and a close.
func openDB(s *sqltest.Server) (*sql.DB, error) {
	return sql.Open(s.Driver, clientDSN(s.Driver, s.DSN))
}

// clientDSN returns dsn with the options the tests' clients use.
func clientDSN(drv, dsn string) string {
	if drv == "mysql" {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		dsn += sep + "interpolateParams=true"
	}
	return dsn
}

// dsnAt returns the DSN of b's server with addr (host:port) in place of
// its address.
func dsnAt(b backend, addr string) (string, error) {
	if b.srv.Driver == "mysql" {
		cfg, err := mysql.ParseDSN(b.srv.DSN)
		if err != nil {
			return "", err
		}
		cfg.Addr = addr
		return cfg.FormatDSN(), nil
	}
	u, err := url.Parse(b.srv.DSN)
	if err != nil {
		return "", err
	}
	u.Host = addr
	return u.String(), nil
}

// db returns a new pool on b's server, closed at t's cleanup.
func (b backend) db(t testing.TB) *sql.DB {
	t.Helper()
	return b.dbOn(t, b.srv.DSN)
}

// dbOn returns a new pool that opens dsn, closed at t's cleanup.
func (b backend) dbOn(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(b.srv.Driver, clientDSN(b.srv.Driver, dsn))
	if err != nil {
		t.Fatal(err)
	}
	if b.plain {
		c, err := stdlib.GetDefaultDriver().(sqldrv.DriverContext).OpenConnector(dsn)
		if err != nil {
			t.Fatal(err)
		}
		_ = db.Close()
		db = sql.OpenDB(plainConnector{c})
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// clients records what b.driver made for each driver: its pool, and the
// fault proxy that its connections go through (nil for an external
// server), for closeClient and stall.
var clients drivertest.Made[*sql.DB]

// clientOf returns what b.driver made for d.
func clientOf(t testing.TB, d driver.Driver) drivertest.Fixture[*sql.DB] {
	t.Helper()
	return clients.Of(t, d)
}

// closeClient closes the *sql.DB under d, as its owner would: every call
// of d must then fail at once with a permanent error (the lockertest hook
// WithCloseClient).
func closeClient(t *testing.T, d driver.Driver) {
	t.Helper()
	if err := clientOf(t, d).Client.Close(); err != nil {
		t.Fatal(err)
	}
}

// stall makes the server stop answering d: the fault proxy in front of
// d's connections swallows every byte, new connections included, while
// the sockets stay open. resume lets bytes through again and resets the
// connections, whose streams have lost bytes (the lockertest hook
// WithStall).
func stall(t *testing.T, d driver.Driver) (resume func()) {
	t.Helper()
	if clientOf(t, d).Proxy == nil {
		t.Skip("external server: no fault proxy in front of it")
	}
	return clients.Stall(t, d)
}

// driver returns a new driver with a pool of its own, as another process
// would have, whose connections go through a fault proxy of their own
// (see stall).
func (b backend) driver(t testing.TB, opts *sqldriver.Options) driver.Driver {
	t.Helper()
	return b.newDriver(t, opts, true)
}

// directDriver is driver without the fault proxy: for tests of what the
// server does to the driver's connections, which the proxy passes on
// later than the server acts.
func (b backend) directDriver(t testing.TB, opts *sqldriver.Options) driver.Driver {
	t.Helper()
	return b.newDriver(t, opts, false)
}

func (b backend) newDriver(t testing.TB, opts *sqldriver.Options, proxied bool) driver.Driver {
	t.Helper()
	if b.plain {
		o := sqldriver.Options{Dialect: sqldriver.PostgreSQL}
		if opts != nil {
			o = *opts
			o.Dialect = sqldriver.PostgreSQL
		}
		opts = &o
	}
	var p *faultproxy.Proxy
	dsn := b.srv.DSN
	if proxied && b.srv.Addr != "" {
		p = faultproxy.ForTest(t, b.srv.Addr)
		var err error
		if dsn, err = dsnAt(b, p.Addr()); err != nil {
			t.Fatal(err)
		}
	}
	db := b.dbOn(t, dsn)
	d, err := sqldriver.New(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	closeAtCleanup(t, d)
	clients.Add(t, d, db, p)
	return d
}

// closeAtCleanup closes d, if it has a Close (a *sqldriver.Driver stops
// listening), at t's cleanup, before its pool is closed.
func closeAtCleanup(t testing.TB, d driver.Driver) {
	if c, ok := d.(io.Closer); ok {
		t.Cleanup(func() { _ = c.Close() })
	}
}

// owner returns a fresh owner string of 32 hex digits.
func owner() string { return drivertest.Owner() }

// uniqueKey returns a lock key used by no other test.
func uniqueKey(t testing.TB, name string) string {
	return t.Name() + "/" + name + "/" + owner()
}

func ctxT(t testing.TB) context.Context { return drivertest.Context(t, 30*time.Second) }

func req(key string, mode driver.Mode, ttl time.Duration) driver.Request {
	return driver.Request{Key: key, Owner: owner(), Mode: mode, TTL: ttl}
}

func mustAcquire(t testing.TB, d driver.Driver, r driver.Request) driver.Lease {
	t.Helper()
	return drivertest.MustAcquire(ctxT(t), t, d, r, 0)
}
