package sqldriver_test

import (
	"testing"

	"github.com/go-locker/locker/internal/recipebench"
	"github.com/go-locker/locker/internal/sqltest"
)

// BenchmarkBackend measures one key contended by separate clients and
// many distinct keys of one client (see recipebench.Backend):
//
//	go test -run '^$' -bench Backend -benchtime 400x
func BenchmarkBackend(b *testing.B) {
	benchServers(b, func(b *testing.B, s *sqltest.Server) {
		recipebench.Backend(b, benchDriverOn(s))
	})
}
