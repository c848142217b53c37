package zkdriver_test

import (
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/zkdriver"
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

// TestConformanceCurator runs the suite in the Curator layouts (see the
// package documentation, section Apache Curator): the suite leaves out what
// their Capabilities do not report (shared holds in LayoutCuratorMutex,
// counted ones in both).
func TestConformanceCurator(t *testing.T) {
	server(t)
	for _, layout := range []zkdriver.Layout{zkdriver.LayoutCuratorMutex, zkdriver.LayoutCuratorReadWrite} {
		t.Run(layout.String(), func(t *testing.T) {
			lockertest.TestDriver(t, func(t *testing.T) driver.Driver {
				return newProxiedDriverOpts(t, conformanceSession, &zkdriver.Options{Layout: layout})
			}, lockertest.WithCloseClient(closeClient), lockertest.WithStall(stall))
		})
	}
}
