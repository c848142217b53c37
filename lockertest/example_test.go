package lockertest_test

import (
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
	"github.com/go-locker/locker/lockertest"
)

// A driver's conformance test is one call in its package's tests. Each
// MakeDriver call returns an independent client of the backend under
// test; the options hook the suite into the backend for the checks that
// need it (here memdriver's own fault hooks: a real driver's test closes
// its network client, and stalls it behind a black-holed proxy).
func ExampleTestDriver() {
	backend := memdriver.NewBackend()
	mk := func(t *testing.T) driver.Driver { return backend.Driver() }
	testConformance := func(t *testing.T) {
		lockertest.TestDriver(t, mk,
			lockertest.WithCloseClient(func(t *testing.T, d driver.Driver) { d.(*memdriver.Driver).Close() }),
			lockertest.WithStall(func(t *testing.T, d driver.Driver) (resume func()) {
				d.(*memdriver.Driver).Block()
				return d.(*memdriver.Driver).Unblock
			}))
	}
	_ = testConformance // in a _test.go file: func TestConformance(t *testing.T) { … }
}
