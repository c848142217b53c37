package zkdriver_test

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/go-locker/locker/internal/faultmatrix"
	"github.com/go-locker/locker/internal/testflag"
	"github.com/go-locker/locker/internal/zktest"
	"go.uber.org/goleak"
)

// zkServer is the standalone ZooKeeper server shared by the tests of this
// package, or nil with zkErr when there is none.
var (
	zkServer *zktest.Server
	zkErr    error
)

type mainM struct{ m *testing.M }

func (m mainM) Run() int {
	zkServer, zkErr = zktest.Start()
	if zkErr != nil && (!errors.Is(zkErr, zktest.ErrNotInstalled) || zktest.Required()) {
		fmt.Fprintln(os.Stderr, "zkdriver tests:", zkErr)
		return 1
	}
	code := m.m.Run()
	if err := stopEnsemble(); err != nil {
		fmt.Fprintln(os.Stderr, "zkdriver tests:", err)
		code = 1
	}
	if zkServer != nil {
		if err := zkServer.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "zkdriver tests:", err)
			code = 1
		}
	}
	return code
}

func TestMain(m *testing.M) {
	serveCuratorChild()               // serves and exits when run as a locker process of the Curator interop tests
	faultmatrix.ServeChild(faultDial) // serves and exits when run as a helper child of the fault matrix
	testflag.Parallel(8, true)        // -short: the conformance suite's waiting subtests together
	goleak.VerifyTestMain(mainM{m})
}
