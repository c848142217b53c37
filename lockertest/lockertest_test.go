package lockertest_test

import (
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
	"github.com/go-locker/locker/lockertest"
)

// TestMemDriver runs the suite over the in-process reference driver: every
// MakeDriver call is a new client of one backend.
func TestMemDriver(t *testing.T) {
	b := memdriver.NewBackend()
	lockertest.TestDriver(t, func(t *testing.T) driver.Driver { return b.Driver() })
}
