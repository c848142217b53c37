package redisdriver_test

import (
	"testing"

	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/faultmatrix"
	"github.com/go-locker/locker/internal/goleak"
	"github.com/go-locker/locker/internal/testflag"
	"github.com/go-locker/locker/internal/testserver"
)

// realRedis is the redis-server shared by the tests of this package, or nil
// with realRedisErr when there is none.
var (
	realRedis    *testserver.Server
	realRedisErr error
)

func TestMain(m *testing.M) {
	faultmatrix.ServeChild(dialMatrix) // returns unless this is a helper child of the fault matrix
	testflag.Parallel(8, true)         // quick run: the conformance suite's waiting subtests together
	goleak.VerifyTestMain(drivertest.Servers(m, "redisdriver", func() error {
		realRedis, realRedisErr = testserver.StartRedis()
		return realRedisErr
	}, testserver.ErrNotInstalled, func() error { return drivertest.CloseAll(realRedis) }))
}
