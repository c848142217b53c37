package etcddriver_test

import (
	"errors"
	"go.uber.org/goleak"
	"testing"

	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/etcdtest"
	"github.com/go-locker/locker/internal/faultmatrix"
	"github.com/go-locker/locker/internal/testflag"
)

// server is the embedded etcd server shared by the tests of this package.
var server *etcdtest.Member

func TestMain(m *testing.M) {
	etcdtest.ServeChild()             // serves and exits when run as a benchmark's or the fault matrix's server process
	faultmatrix.ServeChild(faultDial) // serves and exits when run as a helper child of the fault matrix
	testflag.Parallel(8, true)        // -short: the conformance suite's waiting subtests together
	goleak.VerifyTestMain(drivertest.Servers(m, "etcddriver", func() (err error) {
		server, err = etcdtest.StartServer()
		return err
	}, nil, func() error {
		return errors.Join(closeBenchChild(), drivertest.CloseAll(server))
	}), etcdtest.IgnoreGoroutines()...)
}
