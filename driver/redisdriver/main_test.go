package redisdriver_test

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/go-locker/locker/internal/faultmatrix"
	"github.com/go-locker/locker/internal/testflag"
	"github.com/go-locker/locker/internal/testserver"
	"go.uber.org/goleak"
)

// realRedis is the redis-server shared by the tests of this package, or nil
// with realRedisErr when there is none.
var (
	realRedis    *testserver.Server
	realRedisErr error
)

type mainM struct{ m *testing.M }

func (m mainM) Run() int {
	realRedis, realRedisErr = testserver.StartRedis()
	if realRedisErr != nil && (!errors.Is(realRedisErr, testserver.ErrNotInstalled) || testserver.Required()) {
		fmt.Fprintln(os.Stderr, "redisdriver tests:", realRedisErr)
		return 1
	}
	code := m.m.Run()
	if realRedis != nil {
		if err := realRedis.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "redisdriver tests:", err)
			code = 1
		}
	}
	return code
}

func TestMain(m *testing.M) {
	faultmatrix.ServeChild(dialMatrix) // returns unless this is a helper child of the fault matrix
	testflag.Parallel(8, true)         // -short: the conformance suite's waiting subtests together
	goleak.VerifyTestMain(mainM{m})
}
