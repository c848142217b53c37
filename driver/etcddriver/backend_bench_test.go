package etcddriver_test

import (
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/internal/recipebench"
)

// BenchmarkBackend measures one key contended by separate clients and
// many distinct keys of one client (see recipebench.Backend):
//
//	go test -run '^$' -bench Backend -benchtime 400x
func BenchmarkBackend(b *testing.B) {
	recipebench.Backend(b, func(b *testing.B) driver.Driver { return newDriverOn(b, newClientAt(b, benchURL(b)), nil) })
}
