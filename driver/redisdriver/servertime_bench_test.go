package redisdriver_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/redisdriver"
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

// BenchmarkServerTimeHandoff measures the server time of one acquisition
// on a key that two owners of two drivers pass to each other, as
// contenders in separate processes do: the holder's release hands the key
// over to the queued owner, and then asks for it again (refused, then
// queued). server-us/op is the EVALSHA time per acquisition.
func BenchmarkServerTimeHandoff(b *testing.B) {
	if realRedis == nil {
		b.Skip("no redis-server")
	}
	ctx := context.Background()
	var ds [2]*redisdriver.Driver
	for i := range ds {
		c := redis.NewClient(&redis.Options{Addr: realRedis.Addr, ContextTimeoutEnabled: true})
		b.Cleanup(func() { _ = c.Close() })
		d, err := newDriverErr(c)
		if err != nil {
			b.Fatal(err)
		}
		ds[i] = d
		s, err := d.Subscribe(ctx, "bench/server-time/handoff")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
	}
	admin := redis.NewClient(&redis.Options{Addr: realRedis.Addr})
	b.Cleanup(func() { _ = admin.Close() })
	reqs := [2]driver.Request{}
	for i := range reqs {
		reqs[i] = driver.Request{Key: "bench/server-time/handoff", Owner: owner(), Mode: driver.Exclusive, TTL: 10 * time.Second}
	}
	held, err := ds[0].TryAcquire(ctx, reqs[0])
	if err != nil {
		b.Fatal(err)
	}
	// step: the other owner waits (refused, then queued), the holder
	// releases (the handoff), the other takes the grant.
	turn := 0
	step := func() {
		next := 1 - turn
		if _, err := ds[next].TryAcquire(ctx, reqs[next]); !errors.Is(err, driver.ErrLocked) {
			b.Fatalf("plain attempt: %v", err)
		}
		if _, err := tryQueued(ds[next], ctx, reqs[next]); !errors.Is(err, driver.ErrLocked) {
			b.Fatalf("queued attempt: %v", err)
		}
		if err := ds[turn].Release(ctx, held); err != nil {
			v, _ := admin.Get(ctx, "locker:{bench/server-time/handoff}:lock").Result()
			b.Fatalf("%v: held %+v, lock %q, reqs %v", err, held, v, reqs)
		}
		for {
			if held, err = tryQueued(ds[next], ctx, reqs[next]); err == nil {
				break
			}
		}
		turn = next
	}
	step()
	calls0, usec0 := evalshaStats(b, admin)
	for b.Loop() {
		step()
	}
	calls, usec := evalshaStats(b, admin)
	b.ReportMetric(float64(usec-usec0)/float64(b.N), "server-us/op")
	b.ReportMetric(float64(calls-calls0)/float64(b.N), "evalsha/op")
	_ = ds[turn].Release(ctx, held)
}

// BenchmarkScriptParts measures what the pieces of a lock script cost the
// server (server-us/op: EVALSHA microseconds per call): an empty script,
// then one command or expression at a time, the way the fast paths use
// them. It prices the difference between a script pair that keeps fencing
// tokens across restarts (a clock read in each script, the existence check
// of the lock's keys) and one that does not. The prices are in
// BENCHMARKS.md.
func BenchmarkScriptParts(b *testing.B) {
	if realRedis == nil {
		b.Skip("no redis-server")
	}
	c := redis.NewClient(&redis.Options{Addr: realRedis.Addr, ContextTimeoutEnabled: true})
	b.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	for _, bc := range []struct{ name, src string }{
		{"empty", `return 1`},
		{"TIME", `redis.call('TIME') return 1`},
		{"TIME-microseconds", `local t = redis.call('TIME') return tonumber(t[1]) * 1000000 + tonumber(t[2])`},
		{"GET", `redis.call('GET', KEYS[1]) return 1`},
		{"EXISTS-1", `redis.call('EXISTS', KEYS[1]) return 1`},
		{"EXISTS-5-keys", `local B = KEYS[1] redis.call('EXISTS', B .. 'lock', B .. 'readers', B .. 'queue', B .. 'queue-exp', B .. 'fence') return 1`},
		{"SET-PX", `redis.call('SET', KEYS[1], ARGV[1], 'PX', 10000) return 1`},
		{"SET-PX-DEL", `redis.call('SET', KEYS[1], ARGV[1], 'PX', 10000) redis.call('DEL', KEYS[1]) return 1`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := redis.NewScript(bc.src)
			keys := []string{"locker:{bench/script-parts}:"}
			if err := s.Run(ctx, c, keys, owner()).Err(); err != nil {
				b.Fatal(err)
			}
			calls0, usec0 := evalshaStats(b, c)
			for b.Loop() {
				if err := s.EvalSha(ctx, c, keys, owner()).Err(); err != nil {
					b.Fatal(err)
				}
			}
			calls, usec := evalshaStats(b, c)
			if calls-calls0 < int64(b.N) {
				b.Fatalf("%d EVALSHA for %d calls", calls-calls0, b.N)
			}
			b.ReportMetric(float64(usec-usec0)/float64(calls-calls0), "server-us/op")
		})
	}
}
