package sqldriver_test

import (
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/sqldriver"
	"github.com/go-locker/locker/internal/recipebench"
	"github.com/go-locker/locker/internal/sqltest"
)

// BenchmarkBackend measures one key contended by separate clients and
// many distinct keys of one client (see recipebench.Backend), and, as
// mariadb-nonotify, MariaDB with Options.NoNotify: waiters that poll
// rather than wait for the key's bell.
//
//	go test -run '^$' -bench Backend -benchtime 400x
func BenchmarkBackend(b *testing.B) {
	benchServers(b, func(b *testing.B, s *sqltest.Server) {
		recipebench.Backend(b, benchDriverOn(s))
	})
	b.Run("mariadb-nonotify", func(b *testing.B) {
		if myServer == nil {
			b.Skip("server not available")
		}
		recipebench.Backend(b, func(b *testing.B) driver.Driver {
			d, err := sqldriver.New(countedDB(b, myServer, &roundTrips{}), &sqldriver.Options{NoNotify: true})
			if err != nil {
				b.Fatal(err)
			}
			return d
		})
	})
}
