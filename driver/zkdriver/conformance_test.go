package zkdriver_test

import (
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/zkdriver"
	"github.com/go-locker/locker/lockertest"
	"github.com/go-zookeeper/zk"
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

// TestConformancePlain runs the suite on drivers over go-zookeeper
// connections made without a Session (Options.SessionTimeout declared), as
// a program whose own library made the connection has them. The stall hook
// is left out: a connection that reconnects with watches set hits
// go-zookeeper v1.0.4's data race on its last zxid, which only a Session's
// connection avoids (see TestReconnectWithWatches).
func TestConformancePlain(t *testing.T) {
	server(t)
	lockertest.TestDriver(t, func(t *testing.T) driver.Driver {
		conn, _, err := zk.Connect([]string{server(t).Addr}, conformanceSession, quiet(t), zkdriver.ReconnectAtOnce())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(conn.Close)
		d, err := zkdriver.New(conn, nil, &zkdriver.Options{SessionTimeout: conformanceSession})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		if err := d.Session().Wait(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		return d
	}, lockertest.WithCloseClient(closeClient))
}
