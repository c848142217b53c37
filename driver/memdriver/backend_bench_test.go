package memdriver_test

import (
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
	"github.com/go-locker/locker/internal/recipebench"
)

// BenchmarkBackend measures one key contended by separate clients and
// many distinct keys of one client (see recipebench.Backend):
//
//	go test -run '^$' -bench Backend -benchtime 400x
func BenchmarkBackend(b *testing.B) {
	be := memdriver.NewBackend()
	recipebench.Backend(b, func(b *testing.B) driver.Driver { return be.Driver() })
}
