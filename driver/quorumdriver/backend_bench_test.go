package quorumdriver_test

import (
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/internal/recipebench"
)

// BenchmarkBackend measures one key contended by separate clients and
// many distinct keys of one client (see recipebench.Backend), on a quorum
// of 3 redisdriver members over the servers of the shared pool, each
// client with connections of its own:
//
//	go test -run '^$' -bench Backend -benchtime 400x
func BenchmarkBackend(b *testing.B) {
	recipebench.Backend(b, func(b *testing.B) driver.Driver { return benchQuorum(b, 3) })
}
