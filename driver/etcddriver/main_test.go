package etcddriver_test

import (
	"fmt"
	"testing"

	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/etcdtest"
	"github.com/go-locker/locker/internal/faultmatrix"
	"github.com/go-locker/locker/internal/goleak"
	"github.com/go-locker/locker/internal/proc"
	"github.com/go-locker/locker/internal/testflag"
)

// server is the etcd server shared by the tests of this package; nil when
// it could not be built (the tests that need it skip).
var server *etcdtest.Member

func TestMain(m *testing.M) {
	faultmatrix.ServeChild(faultDial) // serves and exits when run as a helper child of the fault matrix
	testflag.Parallel(8, true)        // quick run: the conformance suite's waiting subtests together
	goleak.VerifyTestMain(drivertest.Servers(m, "etcddriver", func() (err error) {
		server, err = etcdtest.StartServer()
		return err
	}, proc.ErrNoGoServer, func() error {
		return drivertest.CloseAll(server)
	}))
}

// needServer skips tb (or fails it under LOCKER_REQUIRE_SERVERS=1) when the
// shared server could not be started.
func needServer(tb testing.TB) {
	tb.Helper()
	if server == nil {
		proc.SkipOrFail(tb, "etcddriver", fmt.Errorf("no etcd server (see internal/etcdtest): %w", proc.ErrNoGoServer), proc.ErrNoGoServer)
	}
}
