package natsdriver_test

import (
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/lockertest"
)

// TestConformance runs the lockertest suite against natsdriver on a real
// nats-server, each driver with a connection and a fault proxy of its
// own, as separate processes would have.
func TestConformance(t *testing.T) {
	srv := server(t)
	lockertest.TestDriver(t, func(t *testing.T) driver.Driver {
		return newDriver(t, srv.Addr, nil)
	}, lockertest.WithCloseClient(closeClient), lockertest.WithStall(stall))
}
