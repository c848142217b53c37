package sqldriver_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	sqldrv "database/sql/driver"
	"encoding/hex"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/sqldriver"
	"github.com/go-locker/locker/internal/sqltest"
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
	for _, b := range []struct {
		name string
		srv  *sqltest.Server
		err  error
	}{
		{"postgres", pgServer, pgServerErr},
		{"mariadb", myServer, myServerErr},
	} {
		t.Run(b.name, func(t *testing.T) {
			if b.srv == nil {
				sqltest.SkipOrFail(t, b.err)
			}
			f(t, backend{name: b.name, srv: b.srv})
		})
	}
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
	dsn := s.DSN
	if s.Driver == "mysql" {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		dsn += sep + "interpolateParams=true"
	}
	return sql.Open(s.Driver, dsn)
}

// db returns a new pool on b's server, closed at t's cleanup.
func (b backend) db(t testing.TB) *sql.DB {
	t.Helper()
	db, err := openDB(b.srv)
	if err != nil {
		t.Fatal(err)
	}
	if b.plain {
		c, err := stdlib.GetDefaultDriver().(sqldrv.DriverContext).OpenConnector(b.srv.DSN)
		if err != nil {
			t.Fatal(err)
		}
		_ = db.Close()
		db = sql.OpenDB(plainConnector{c})
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// driver returns a new driver with a pool of its own, as another process
// would have.
func (b backend) driver(t testing.TB, opts *sqldriver.Options) driver.Driver {
	t.Helper()
	if b.plain {
		o := sqldriver.Options{Dialect: sqldriver.PostgreSQL}
		if opts != nil {
			o = *opts
			o.Dialect = sqldriver.PostgreSQL
		}
		opts = &o
	}
	d, err := sqldriver.New(b.db(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	closeAtCleanup(t, d)
	return d
}

// closeAtCleanup closes d, if it is a *sqldriver.NotifyDriver, at t's
// cleanup, before its pool is closed.
func closeAtCleanup(t testing.TB, d driver.Driver) {
	if c, ok := d.(io.Closer); ok {
		t.Cleanup(func() { _ = c.Close() })
	}
}

// owner returns a fresh owner string of 32 hex digits.
func owner() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// uniqueKey returns a lock key used by no other test.
func uniqueKey(t testing.TB, name string) string {
	return t.Name() + "/" + name + "/" + owner()
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func req(key string, mode driver.Mode, ttl time.Duration) driver.Request {
	return driver.Request{Key: key, Owner: owner(), Mode: mode, TTL: ttl}
}

func mustAcquire(t testing.TB, d driver.Driver, r driver.Request) driver.Lease {
	t.Helper()
	l, err := d.TryAcquire(ctxT(t), r)
	if err != nil {
		t.Fatalf("TryAcquire(%q, %v, %v): %v", r.Key, r.Mode, r.TTL, err)
	}
	if l.Token == 0 || l.Key != r.Key || l.Owner != r.Owner || l.Mode != r.Mode {
		t.Fatalf("TryAcquire(%+v) = %+v", r, l)
	}
	return l
}
