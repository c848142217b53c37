package memcachedriver_test

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/go-locker/locker/internal/faultmatrix"
	"github.com/go-locker/locker/internal/memcachedtest"
	"github.com/go-locker/locker/internal/testflag"
	"go.uber.org/goleak"
)

// sharedServer is the memcached shared by the tests of this package, or
// nil with sharedServerErr when there is none.
var (
	sharedServer    *memcachedtest.Server
	sharedServerErr error
)

type mainM struct{ m *testing.M }

func (m mainM) Run() int {
	sharedServer, sharedServerErr = memcachedtest.Start()
	if sharedServerErr != nil && (!errors.Is(sharedServerErr, memcachedtest.ErrNotInstalled) || memcachedtest.Required()) {
		fmt.Fprintln(os.Stderr, "memcachedriver tests:", sharedServerErr)
		return 1
	}
	code := m.m.Run()
	if sharedServer != nil {
		if err := sharedServer.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "memcachedriver tests:", err)
			code = 1
		}
	}
	return code
}

func TestMain(m *testing.M) {
	faultmatrix.ServeChild(dialMatrix) // returns unless this is a helper child of the fault matrix
	testflag.Parallel(8, false)
	goleak.VerifyTestMain(mainM{m})
}
