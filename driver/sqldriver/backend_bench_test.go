package sqldriver_test

import (
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/sqldriver"
	"github.com/go-locker/locker/internal/recipebench"
	"github.com/go-locker/locker/internal/sqltest"
)

// BenchmarkBackend measures one key contended by separate clients and
// many distinct keys of one client (see recipebench.Backend):
//
//	go test -run '^$' -bench Backend -benchtime 400x
func BenchmarkBackend(b *testing.B) {
	benchServers(b, func(b *testing.B, s *sqltest.Server) {
		recipebench.Backend(b, func(b *testing.B) driver.Driver {
			d, err := sqldriver.New(countedDB(b, s, &roundTrips{}), nil)
			if err != nil {
				b.Fatal(err)
			}
			closeAtCleanup(b, d)
			return d
		})
	})
}
