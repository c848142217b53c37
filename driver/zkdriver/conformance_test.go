package zkdriver_test

import (
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/lockertest"
)

// TestConformance runs the lockertest suite against zkdriver on a real
// ZooKeeper server, each driver with a connection (and session) of its
// own, as separate processes would have, through a fault proxy of its own
// (see closeClient and stall).
func TestConformance(t *testing.T) {
	server(t)
	lockertest.TestDriver(t, func(t *testing.T) driver.Driver {
		return newProxiedDriver(t, conformanceSession)
	}, lockertest.WithCloseClient(closeClient), lockertest.WithStall(stall))
}
