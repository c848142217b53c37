package etcddriver_test

import (
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/internal/recipebench"
)

// BenchmarkRecipes measures a permit's acquire and release and a
// leadership handoff beside a Mutex pair, on etcd.
func BenchmarkRecipes(b *testing.B) {
	recipebench.Run(b, func(b *testing.B) driver.Driver { return newDriverOn(b, newClientAt(b, benchURL(b)), nil) })
}
