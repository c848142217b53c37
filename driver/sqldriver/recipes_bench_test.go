package sqldriver_test

import (
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/sqldriver"
	"github.com/go-locker/locker/internal/recipebench"
	"github.com/go-locker/locker/internal/sqltest"
)

// benchDriverOn returns a maker of drivers on s, each with a *sql.DB of
// its own (as separate processes would have), closed when b ends.
func benchDriverOn(s *sqltest.Server) func(b *testing.B) driver.Driver {
	return func(b *testing.B) driver.Driver {
		d, err := sqldriver.New(countedDB(b, s, &roundTrips{}), nil)
		if err != nil {
			b.Fatal(err)
		}
		closeAtCleanup(b, d)
		return d
	}
}

// BenchmarkRecipes measures a permit's acquire and release and a
// leadership handoff beside a Mutex pair, on PostgreSQL and MariaDB.
func BenchmarkRecipes(b *testing.B) {
	benchServers(b, func(b *testing.B, s *sqltest.Server) {
		recipebench.Run(b, benchDriverOn(s))
	})
}
