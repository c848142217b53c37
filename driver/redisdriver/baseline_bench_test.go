package redisdriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// rawRelease is the usual compare-and-delete unlock script.
var rawRelease = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)

// BenchmarkRawGoRedis is the fewest round trips and allocations a Redis
// lock can take with go-redis: SET NX PX, then a compare-and-delete
// EVALSHA. No fencing token, no wait queue, no owner check on acquire: it
// is the floor that BenchmarkMutexLockUnlock is compared with.
func BenchmarkRawGoRedis(b *testing.B) {
	if realRedis == nil {
		b.Skip("no redis-server")
	}
	c := redis.NewClient(&redis.Options{Addr: realRedis.Addr, ContextTimeoutEnabled: true})
	b.Cleanup(func() { _ = c.Close() })
	rt := &roundTrips{}
	c.AddHook(rt)
	ctx := context.Background()
	_ = rawRelease.Load(ctx, c).Err()
	rt.n.Store(0)
	b.ReportAllocs()
	for b.Loop() {
		if err := c.SetNX(ctx, "bench/raw", "owner", 10*time.Second).Err(); err != nil {
			b.Fatal(err)
		}
		if err := rawRelease.Run(ctx, c, []string{"bench/raw"}, "owner").Err(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rt.n.Load())/float64(b.N), "roundtrips/op")
}
