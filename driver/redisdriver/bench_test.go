package redisdriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/testserver"
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

// BenchmarkRefreshBatch1000 measures RefreshBatch of 1000 leases: one
// round trip.
func BenchmarkRefreshBatch1000(b *testing.B) {
	drivertest.BenchRefreshBatch(b, benchDriver(b), 1000, nil)
}

// BenchmarkAcquireReleaseClients is BenchmarkAcquireRelease with a deadline
// on each call's context, over each kind of client, made with
// ContextTimeoutEnabled (ctx) or with go-redis's default options
// (default): the driver bounds the default clients' calls itself, on the
// caller's goroutine (see docs/redisdriver.md, "Clients and contexts").
func BenchmarkAcquireReleaseClients(b *testing.B) {
	if realRedis == nil {
		b.Skip("no redis-server")
	}
	cluster := testserver.RedisCluster(b)
	for _, k := range []struct {
		name string
		make func() redis.UniversalClient
	}{
		{"Client/ctx", func() redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: realRedis.Addr, ContextTimeoutEnabled: true})
		}},
		{"Client/default", func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: realRedis.Addr}) }},
		{"ClusterClient/ctx", func() redis.UniversalClient {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{cluster.Addr}, ContextTimeoutEnabled: true})
		}},
		{"ClusterClient/default", func() redis.UniversalClient {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{cluster.Addr}})
		}},
		{"Ring/ctx", func() redis.UniversalClient {
			return redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": realRedis.Addr}, ContextTimeoutEnabled: true})
		}},
		{"Ring/default", func() redis.UniversalClient {
			return redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": realRedis.Addr}})
		}},
	} {
		b.Run(k.name, func(b *testing.B) {
			c := k.make()
			b.Cleanup(func() { _ = c.Close() })
			d, err := newDriverErr(c)
			if err != nil {
				b.Fatal(err)
			}
			r := driver.Request{Key: "bench/acquire-release-clients", Owner: owner(), TTL: 10 * time.Second}
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			acquireReleaseCtx(ctx, b, d, r) // loads a cluster's slot map
			b.ReportAllocs()
			cpu := drivertest.CPUTime()
			for b.Loop() {
				acquireReleaseCtx(ctx, b, d, r)
			}
			b.ReportMetric(float64((drivertest.CPUTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// acquireRelease acquires r and releases it.
func acquireRelease(b *testing.B, d driver.Driver, r driver.Request) {
	acquireReleaseCtx(context.Background(), b, d, r)
}

// acquireReleaseCtx acquires r and releases it, with ctx.
func acquireReleaseCtx(ctx context.Context, b *testing.B, d driver.Driver, r driver.Request) {
	l, err := d.TryAcquire(ctx, r)
	if err != nil {
		b.Fatal(err)
	}
	if err := d.Release(ctx, l); err != nil {
		b.Fatal(err)
	}
}
