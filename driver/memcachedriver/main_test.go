package memcachedriver_test

import (
	"testing"

	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/faultmatrix"
	"github.com/go-locker/locker/internal/goleak"
	"github.com/go-locker/locker/internal/memcachedtest"
	"github.com/go-locker/locker/internal/testflag"
)

// sharedServer is the memcached shared by the tests of this package, or
// nil with sharedServerErr when there is none.
var (
	sharedServer    *memcachedtest.Server
	sharedServerErr error
)

func TestMain(m *testing.M) {
	faultmatrix.ServeChild(dialMatrix) // returns unless this is a helper child of the fault matrix
	testflag.Parallel(8, false)
	goleak.VerifyTestMain(drivertest.Servers(m, "memcachedriver", func() error {
		sharedServer, sharedServerErr = memcachedtest.Start()
		return sharedServerErr
	}, memcachedtest.ErrNotInstalled, func() error { return drivertest.CloseAll(sharedServer) }))
}
