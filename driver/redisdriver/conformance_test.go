package redisdriver_test

import (
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/lockertest"
)

// TestConformance runs the lockertest suite against redisdriver on
// a real redis-server (RESP3 and RESP2), each driver with
// a client and connections of its own, as separate processes would have.
// -short runs it on the real server with RESP3 only.
func TestConformance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		if testing.Short() && b.name != "redis" {
			t.Skipf("-short: the suite runs on redis-server with RESP3 only (%s in the full run)", b.name)
		}
		if b.name == "redis" {
			// Each driver behind a fault proxy of its own, for the
			// closed-client and stall checks.
			srv := realServer(t)
			lockertest.TestDriver(t, func(t *testing.T) driver.Driver { return proxiedDriver(t, srv.Addr, nil) },
				lockertest.WithCloseClient(closeClient), lockertest.WithStall(stall))
			return
		}
		lockertest.TestDriver(t, func(t *testing.T) driver.Driver {
			return newDriver(t, b.client(t))
		})
	})
}
