package memcachedriver_test

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/go-locker/locker/internal/faultmatrix"
	"github.com/go-locker/locker/internal/memcachedtest"
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
	parallelWaits()
	goleak.VerifyTestMain(mainM{m})
}

// parallelWaits lets at least eight parallel tests run at once unless
// -parallel says otherwise. Its default, GOMAXPROCS, would run the timed
// subtests of the conformance suite two at a time on a two-core machine,
// although they mostly wait for whole-second leases to run out; the
// suite means them to run together, and to take about as long as the
// longest.
func parallelWaits() {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(max(8, runtime.GOMAXPROCS(0))))
	}
}
