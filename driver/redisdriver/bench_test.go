package redisdriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/redis/go-redis/v9"
)

func benchDriver(b *testing.B) driver.Driver {
	if realRedis == nil {
		b.Skip("no redis-server")
	}
	c := redis.NewClient(&redis.Options{Addr: realRedis.Addr, ContextTimeoutEnabled: true})
	b.Cleanup(func() { _ = c.Close() })
	d, err := newDriverErr(c)
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// BenchmarkAcquireRelease measures an uncontended TryAcquire and Release
// pair: two round trips.
func BenchmarkAcquireRelease(b *testing.B) {
	d := benchDriver(b)
	r := driver.Request{Key: "bench/acquire-release", Owner: owner(), TTL: 10 * time.Second}
	for b.Loop() {
		acquireRelease(b, d, r)
	}
}

// acquireRelease acquires r and releases it.
func acquireRelease(b *testing.B, d driver.Driver, r driver.Request) {
	ctx := context.Background()
	l, err := d.TryAcquire(ctx, r)
	if err != nil {
		b.Fatal(err)
	}
	if err := d.Release(ctx, l); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRefreshBatch1000 measures RefreshBatch of 1000 leases: one
// round trip.
func BenchmarkRefreshBatch1000(b *testing.B) {
	drivertest.BenchRefreshBatch(b, benchDriver(b), 1000, nil)
}
