package sqldriver_test

import (
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/sqldriver"
	"github.com/go-locker/locker/internal/testflag"
	"github.com/go-locker/locker/lockertest"
)

// TestConformance runs the lockertest suite against PostgreSQL (with
// LISTEN/NOTIFY) and MariaDB (polling), each driver with a connection pool
// of its own, as separate processes would have. With -short only
// PostgreSQL's runs, the dialect with the most paths of its own
// (pipelining, notifications); MariaDB then gets TestLockerQuick and the
// package's other tests, which run against both dialects.
func TestConformance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		if !testflag.Long() && b.name != "postgres" {
			t.Skip("quick run (LOCKER_LONG=1 for the long one): the suite runs against PostgreSQL only; TestLockerQuick covers this dialect")
		}
		lockertest.TestDriver(t, func(t *testing.T) driver.Driver { return b.driver(t, nil) },
			lockertest.WithCloseClient(closeClient), lockertest.WithStall(stall))
	})
}

// TestConformancePortable runs the suite against PostgreSQL through a
// database/sql driver that sqldriver does not recognise as pgx's: each
// acquire is a database/sql transaction (five round trips) and waiters
// poll, as with lib/pq. With -short it is skipped: MariaDB's tests take
// the same transaction and polling code with the other dialect's SQL.
func TestConformancePortable(t *testing.T) {
	if !testflag.Long() {
		t.Skip("quick run (LOCKER_LONG=1 for the long one): the portable path runs in the long run (MariaDB's tests take its transaction and polling code)")
	}
	b := plainPostgres(t)
	lockertest.TestDriver(t, func(t *testing.T) driver.Driver {
		d := b.driver(t, nil)
		if d.(*sqldriver.Driver).Capabilities().Notify {
			t.Fatalf("New returned a driver that notifies for a database/sql driver it should not know")
		}
		return d
	}, lockertest.WithCloseClient(closeClient), lockertest.WithStall(stall))
}
