package redisdriver_test

import (
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/internal/testflag"
	"github.com/go-locker/locker/lockertest"
	"github.com/redis/go-redis/v9"
)

// TestConformance runs the lockertest suite against redisdriver on
// a real redis-server (RESP3 and RESP2), each driver with
// a client and connections of its own, as separate processes would have.
// -short runs it on the real server with RESP3 only.
func TestConformance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		if !testflag.Long() && b.name != "redis" {
			t.Skipf("quick run (LOCKER_LONG=1 for the long one): the suite runs on redis-server with RESP3 only (%s in the long run)", b.name)
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

// TestConformanceDefaultOptions runs the lockertest suite against
// redisdriver over clients made with go-redis's default options (no
// ContextTimeoutEnabled: the driver's calls go through its bounded clone),
// each behind a fault proxy of its own. -short skips it.
func TestConformanceDefaultOptions(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: TestConformance covers the driver; this covers its clone of a default-options client")
	}
	srv := realServer(t)
	defaults := func(o *redis.Options) { o.ContextTimeoutEnabled = false }
	lockertest.TestDriver(t, func(t *testing.T) driver.Driver { return proxiedDriver(t, srv.Addr, defaults) },
		lockertest.WithCloseClient(closeClient), lockertest.WithStall(stall))
}
