package memdriver_test

import (
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
	"github.com/go-locker/locker/lockertest"
)

func TestConformance(t *testing.T) {
	b := memdriver.NewBackend()
	lockertest.TestDriver(t, func(t *testing.T) driver.Driver { return b.Driver() })
}
