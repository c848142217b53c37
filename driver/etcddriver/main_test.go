package etcddriver_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/go-locker/locker/internal/etcdtest"
	"github.com/go-locker/locker/internal/faultmatrix"
	"github.com/go-locker/locker/internal/testflag"
	"go.uber.org/goleak"
)

// server is the embedded etcd server shared by the tests of this package.
var server *etcdtest.Member

type mainM struct{ m *testing.M }

func (m mainM) Run() int {
	var err error
	server, err = etcdtest.StartServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcddriver tests:", err)
		return 1
	}
	code := m.m.Run()
	if err := closeBenchChild(); err != nil {
		fmt.Fprintln(os.Stderr, "etcddriver tests:", err)
		code = 1
	}
	if err := server.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "etcddriver tests:", err)
		code = 1
	}
	return code
}

func TestMain(m *testing.M) {
	etcdtest.ServeChild()             // serves and exits when run as a benchmark's or the fault matrix's server process
	faultmatrix.ServeChild(faultDial) // serves and exits when run as a helper child of the fault matrix
	testflag.Parallel(8, true)        // -short: the conformance suite's waiting subtests together
	goleak.VerifyTestMain(mainM{m}, etcdtest.IgnoreGoroutines()...)
}
