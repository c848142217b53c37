package quorumdriver_test

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/go-locker/locker/internal/testflag"
	"github.com/go-locker/locker/internal/testserver"
	"go.uber.org/goleak"
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

type mainM struct{ m *testing.M }

func (m mainM) Run() int {
	for range poolSize {
		s, err := testserver.StartPrivateRedis()
		if err != nil {
			poolErr = err
			break
		}
		pool = append(pool, s)
	}
	if poolErr != nil && (!errors.Is(poolErr, testserver.ErrNotInstalled) || testserver.Required()) {
		fmt.Fprintln(os.Stderr, "quorumdriver tests:", poolErr)
		closePool()
		return 1
	}
	code := m.m.Run()
	if err := closePool(); err != nil {
		fmt.Fprintln(os.Stderr, "quorumdriver tests:", err)
		code = 1
	}
	return code
}

func closePool() error {
	var errs []error
	for _, s := range pool {
		errs = append(errs, s.Close())
	}
	pool = nil
	return errors.Join(errs...)
}

func TestMain(m *testing.M) {
	testflag.Parallel(8, true) // -short: the conformance suites' waiting subtests together
	goleak.VerifyTestMain(mainM{m})
}
