package mongodriver_test

import (
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/lockertest"
)

// TestConformance runs the lockertest suite against mongodriver on
// FerretDB, each driver with a client, connections and a fault proxy of
// its own, as separate processes would have, on a collection per subtest.
func TestConformance(t *testing.T) {
	srv := server(t)
	lockertest.TestDriver(t, func(t *testing.T) driver.Driver {
		return newDriver(t, srv)
	}, lockertest.WithCloseClient(closeClient), lockertest.WithStall(stall))
}
