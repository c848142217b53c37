package sqldriver_test

import (
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/lockertest"
)

// TestConformance runs the lockertest suite against PostgreSQL (with
// LISTEN/NOTIFY) and MariaDB (polling), each driver with a connection pool
// of its own, as separate processes would have.
func TestConformance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		lockertest.TestDriver(t, func(t *testing.T) driver.Driver { return b.driver(t, nil) })
	})
}
