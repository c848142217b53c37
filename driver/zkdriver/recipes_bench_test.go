package zkdriver_test

import (
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/internal/recipebench"
)

// BenchmarkRecipes measures a permit's acquire and release and a
// leadership handoff beside a Mutex pair, on ZooKeeper.
func BenchmarkRecipes(b *testing.B) {
	recipebench.Run(b, func(b *testing.B) driver.Driver { return countedDriver(b, &countingDialer{}) })
}
