package redisdriver_test

import (
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/lockertest"
)

// TestConformance runs the lockertest suite against redisdriver on
// miniredis and on a real redis-server (RESP3 and RESP2), each driver with
// a client and connections of its own, as separate processes would have.
func TestConformance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		lockertest.TestDriver(t, func(t *testing.T) driver.Driver {
			return newDriver(t, b.client(t))
		})
	})
}
