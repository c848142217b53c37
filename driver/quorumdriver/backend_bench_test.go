package quorumdriver_test

import (
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/quorumdriver"
	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/go-locker/locker/internal/recipebench"
)

// BenchmarkBackend measures one key contended by separate clients and
// many distinct keys of one client (see recipebench.Backend), on a quorum
// of 3 redisdriver members over the servers of the shared pool, each
// client with connections of its own:
//
//	go test -run '^$' -bench Backend -benchtime 400x
func BenchmarkBackend(b *testing.B) {
	recipebench.Backend(b, func(b *testing.B) driver.Driver {
		cs := benchClients(b, 3)
		ms := make([]driver.Driver, len(cs))
		for i, c := range cs {
			var err error
			if ms[i], err = redisdriver.New(c, nil); err != nil {
				b.Fatal(err)
			}
		}
		d, err := quorumdriver.New(ms, nil)
		if err != nil {
			b.Fatal(err)
		}
		return d
	})
}
