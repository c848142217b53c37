// Package testflag adjusts the go test flags of a test binary from its
// TestMain.
package testflag

import (
	"flag"
	"runtime"
	"strconv"
	"testing"
)

// Parallel lets at least n parallel tests run at once, unless -parallel
// was given (or, with shortOnly, unless -short is off). The default,
// GOMAXPROCS, runs the timed subtests of lockertest's conformance suite
// two at a time on a two-core machine, although they mostly wait for
// leases to run out: the suite means them to run together, and to take
// about as long as the longest. Call it first in TestMain.
func Parallel(n int, shortOnly bool) {
	flag.Parse()
	if shortOnly && !testing.Short() {
		return
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(max(n, runtime.GOMAXPROCS(0))))
	}
}
