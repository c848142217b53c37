package drivertest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/go-locker/locker/internal/proc"
)

// Servers returns the m that a driver test package's TestMain passes to
// goleak.VerifyTestMain: its Run starts the servers the package's tests
// share with start, runs m's tests and stops the servers with stop (see
// [Run] for what start's and stop's errors do); pkg names the package in
// what is written to stderr. goleak then checks that no goroutine leaked:
//
//	func TestMain(m *testing.M) {
//		goleak.VerifyTestMain(drivertest.Servers(m, "mydriver", start, ErrNotInstalled, stop))
//	}
func Servers(m *testing.M, pkg string, start func() error, notInstalled error, stop func() error) interface{ Run() int } {
	return runner{m, pkg, start, notInstalled, stop}
}

type runner struct {
	m            interface{ Run() int }
	pkg          string
	start        func() error
	notInstalled error
	stop         func() error
}

func (r runner) Run() int { return Run(r.m, r.pkg, r.start, r.notInstalled, r.stop) }

// Run calls start, m.Run unless start failed, and stop, and returns m.Run's
// exit code, or 1 when start or stop failed. An error from start lets the
// tests run when it wraps notInstalled (every error it joins does) and
// LOCKER_REQUIRE_SERVERS is not "1": the tests that need the missing server
// then skip themselves. stop runs even when start failed, to close what it
// started. Errors are written to stderr after pkg.
func Run(m interface{ Run() int }, pkg string, start func() error, notInstalled error, stop func() error) int {
	code := 1
	if err := start(); err != nil && (!onlyNotInstalled(err, notInstalled) || proc.Required()) {
		fmt.Fprintf(os.Stderr, "%s tests: %v\n", pkg, err)
	} else {
		code = m.Run()
	}
	if err := stop(); err != nil {
		fmt.Fprintf(os.Stderr, "%s tests: %v\n", pkg, err)
		code = 1
	}
	return code
}

// onlyNotInstalled reports whether err wraps notInstalled, or, for an
// error of errors.Join, whether each error it joins does.
func onlyNotInstalled(err, notInstalled error) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !onlyNotInstalled(e, notInstalled) {
				return false
			}
		}
		return true
	}
	return notInstalled != nil && errors.Is(err, notInstalled)
}

// CloseAll closes each server of ss that is not nil and returns the
// errors joined.
func CloseAll[S interface {
	comparable
	io.Closer
}](ss ...S) error {
	var zero S
	var errs []error
	for _, s := range ss {
		if s != zero {
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(errs...)
}
