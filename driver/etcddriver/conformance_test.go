package etcddriver_test

import (
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/lockertest"
)

// TestConformance runs the lockertest suite against etcddriver on an
// etcd server process (internal/etcdtest), each driver with a client and connection of its
// own, as separate processes would have, through a fault proxy of its own
// (see closeClient and stall).
func TestConformance(t *testing.T) {
	parallelIfShort(t)
	lockertest.TestDriver(t, func(t *testing.T) driver.Driver { return newProxiedDriver(t) },
		lockertest.WithCloseClient(closeClient), lockertest.WithStall(stall))
}
