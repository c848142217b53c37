package zkdriver_test

import (
	"errors"
	"testing"

	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/faultmatrix"
	"github.com/go-locker/locker/internal/goleak"
	"github.com/go-locker/locker/internal/testflag"
	"github.com/go-locker/locker/internal/zktest"
)

// zkServer is the standalone ZooKeeper server shared by the tests of this
// package, or nil with zkErr when there is none.
var (
	zkServer *zktest.Server
	zkErr    error
)

func TestMain(m *testing.M) {
	serveCuratorChild()               // serves and exits when run as a locker process of the Curator interop tests
	faultmatrix.ServeChild(faultDial) // serves and exits when run as a helper child of the fault matrix
	testflag.Parallel(8, true)        // quick run: the conformance suite's waiting subtests together
	goleak.VerifyTestMain(drivertest.Servers(m, "zkdriver", func() error {
		zkServer, zkErr = zktest.Start()
		return zkErr
	}, zktest.ErrNotInstalled, func() error { return errors.Join(stopEnsemble(), drivertest.CloseAll(zkServer)) }))
}
