// Package testflag adjusts the go test flags of a test binary from its
// TestMain, and says which configuration the tests run in.
//
// The tests run in their quick configuration unless LOCKER_LONG=1: every
// driver against its real server and lockertest on each, but the suites on
// fewer configurations (one Redis protocol, quorums of 3, PostgreSQL for
// sqldriver's full suite), their waiting subtests side by side, and the
// longest runs (failover ensembles, soaks) left out. LOCKER_LONG=1 runs
// everything; -short forces the quick configuration.
package testflag

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// EnvLong, set to "1", runs the tests in their long configuration.
const EnvLong = "LOCKER_LONG"

// Long reports whether the tests run in their long configuration:
// LOCKER_LONG=1 and no -short.
func Long() bool { return os.Getenv(EnvLong) == "1" && !testing.Short() }

// Parallel lets at least n parallel tests run at once, unless -parallel
// was given (or, with quickOnly, in the long configuration). The default,
// GOMAXPROCS, runs the timed subtests of lockertest's conformance suite
// two at a time on a two-core machine, although they mostly wait for
// leases to run out: the suite means them to run together, and to take
// about as long as the longest. Call it first in TestMain.
func Parallel(n int, quickOnly bool) {
	flag.Parse()
	if quickOnly && Long() {
		return
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(max(n, runtime.GOMAXPROCS(0))))
	}
}
