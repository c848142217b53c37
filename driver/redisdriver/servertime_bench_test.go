package redisdriver_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/redis/go-redis/v9"
)

// evalshaStats returns the calls and microseconds that the server has
// spent in EVALSHA so far (INFO commandstats).
func evalshaStats(b *testing.B, c *redis.Client) (calls, usec int64) {
	b.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for f := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return calls, usec
}

// BenchmarkServerTime measures the server time the scripts take, which
// the wall-clock benchmarks hide behind the round trip on a busy machine:
// the microseconds of EVALSHA per acquire and release pair (server-us/op),
// uncontended, for an exclusive request (the fast paths), an uncounted
// shared one, a counted one beside 3 other counted holds, and an
// exclusive one with a value.
func BenchmarkServerTime(b *testing.B) {
	if realRedis == nil {
		b.Skip("no redis-server")
	}
	for _, bc := range []struct {
		name   string
		others int
		req    driver.Request
	}{
		{"exclusive", 0, driver.Request{Mode: driver.Exclusive}},
		{"shared", 0, driver.Request{Mode: driver.Shared}},
		{"counted", 3, driver.Request{Mode: driver.Shared, Limit: 8, Weight: 2}},
		{"value", 0, driver.Request{Mode: driver.Exclusive, Value: "node-1:8080"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := redis.NewClient(&redis.Options{Addr: realRedis.Addr, ContextTimeoutEnabled: true})
			b.Cleanup(func() { _ = c.Close() })
			d, err := newDriverErr(c)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			r := bc.req
			r.Key, r.Owner, r.TTL = "bench/server-time/"+bc.name, owner(), 10*time.Second
			for range bc.others {
				o := r
				o.Owner, o.Weight = owner(), min(r.Weight, 1)
				l, err := d.TryAcquire(ctx, o)
				if err != nil {
					b.Fatal(err)
				}
				defer func() { _ = d.Release(ctx, l) }()
			}
			acquireRelease(b, d, r) // warm up: scripts loaded
			calls0, usec0 := evalshaStats(b, c)
			for b.Loop() {
				acquireRelease(b, d, r)
			}
			calls, usec := evalshaStats(b, c)
			if calls-calls0 < int64(2*b.N) {
				b.Fatalf("%d EVALSHA for %d pairs", calls-calls0, b.N)
			}
			b.ReportMetric(float64(usec-usec0)/float64(b.N), "server-us/op")
		})
	}
}
