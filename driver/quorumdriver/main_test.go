package quorumdriver_test

import (
	"testing"

	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/goleak"
	"github.com/go-locker/locker/internal/testflag"
	"github.com/go-locker/locker/internal/testserver"
)

// poolSize is the number of redis-servers shared by the tests that do not
// kill or pause servers.
const poolSize = 5

// pool is the set of redis-servers shared by the tests, or nil with
// poolErr when redis-server is not installed.
var (
	pool    []*testserver.Server
	poolErr error
)

func TestMain(m *testing.M) {
	testflag.Parallel(8, true) // quick run: the conformance suites' waiting subtests together
	goleak.VerifyTestMain(drivertest.Servers(m, "quorumdriver", startPool, testserver.ErrNotInstalled, closePool))
}

// startPool starts the pool's servers.
func startPool() error {
	for range poolSize {
		s, err := testserver.StartPrivateRedis()
		if err != nil {
			poolErr = err
			return err
		}
		pool = append(pool, s)
	}
	return nil
}

// closePool closes the pool's servers.
func closePool() error {
	err := drivertest.CloseAll(pool...)
	pool = nil
	return err
}
