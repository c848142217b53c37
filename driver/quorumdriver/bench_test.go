package quorumdriver_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/quorumdriver"
	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/redis/go-redis/v9"
)

// benchClients returns one go-redis client per server of the shared pool,
// n of them, closed when b ends.
func benchClients(b *testing.B, n int) []*redis.Client {
	b.Helper()
	addrs := poolAddrs(b, n)
	cs := make([]*redis.Client, n)
	for i, a := range addrs {
		cs[i] = redis.NewClient(&redis.Options{Addr: a, ContextTimeoutEnabled: true, MaxRetries: -1})
		b.Cleanup(func() { _ = cs[i].Close() })
		if err := cs[i].Ping(b.Context()).Err(); err != nil {
			b.Fatal(err)
		}
	}
	return cs
}

// benchQuorum returns a quorum of n redisdriver members, each over a
// server of the shared pool with a client of its own.
func benchQuorum(b *testing.B, n int) driver.Driver {
	cs := benchClients(b, n)
	ms := make([]driver.Driver, len(cs))
	for i, c := range cs {
		var err error
		if ms[i], err = redisdriver.New(c, nil); err != nil {
			b.Fatal(err)
		}
	}
	d, err := quorumdriver.New(ms, nil)
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// BenchmarkPair is an uncontended TryAcquire+Release pair on one key, on a
// single redisdriver and on a quorum of 3 redisdriver members, each over a
// server of the shared pool: the driver-level part of the bench's
// uncontended cell, to profile (-cpuprofile, -memprofile).
func BenchmarkPair(b *testing.B) {
	run := func(b *testing.B, d driver.Driver) {
		ctx := b.Context()
		r := req("bench-pair", 10*time.Second)
		l := driver.Lease{Key: r.Key, Owner: r.Owner, Mode: r.Mode, TTL: r.TTL}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if _, err := d.TryAcquire(ctx, r); err != nil {
				b.Fatal(err)
			}
			if err := d.Release(ctx, l); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("single", func(b *testing.B) {
		d, err := redisdriver.New(benchClients(b, 1)[0], nil)
		if err != nil {
			b.Fatal(err)
		}
		run(b, d)
	})
	b.Run("quorum3", func(b *testing.B) { run(b, benchQuorum(b, 3)) })
}

// BenchmarkFloor measures the floor under BenchmarkPair's ratio: plain
// go-redis round trips, with no locking logic, in the shape of each pair.
// "single 2 waits" is one server's pair (SET NX PX, then DEL); "3 members
// 3 waits" is a fenced quorum grant and its release (SET NX PX on 3
// servers in parallel, a write-back SET on one, DEL on 3 in parallel);
// "3 members 2 waits" is the same without the write-back, as Redlock
// without tokens does. Parallel requests run in goroutines, one per member
// but the last, as quorumdriver runs them.
func BenchmarkFloor(b *testing.B) {
	const key, val = "bench-floor", "owner"
	set := func(ctx context.Context, c *redis.Client) error {
		return c.SetArgs(ctx, key, val, redis.SetArgs{Mode: "NX", TTL: 10 * time.Second}).Err()
	}
	del := func(ctx context.Context, c *redis.Client) error { return c.Del(ctx, key).Err() }
	wb := func(ctx context.Context, c *redis.Client) error {
		return c.Set(ctx, key+"-wb", val, 10*time.Second).Err()
	}
	fan := func(ctx context.Context, cs []*redis.Client, f func(context.Context, *redis.Client) error) error {
		var wg sync.WaitGroup
		errs := make([]error, len(cs))
		for i := range len(cs) - 1 {
			wg.Go(func() { errs[i] = f(ctx, cs[i]) })
		}
		errs[len(cs)-1] = f(ctx, cs[len(cs)-1])
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}
	for _, c := range []struct {
		name      string
		members   int
		writeBack bool
	}{{"single 2 waits", 1, false}, {"3 members 3 waits", 3, true}, {"3 members 2 waits", 3, false}} {
		b.Run(c.name, func(b *testing.B) {
			cs := benchClients(b, c.members)
			ctx := b.Context()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := fan(ctx, cs, set); err != nil {
					b.Fatal(err)
				}
				if c.writeBack {
					if err := wb(ctx, cs[0]); err != nil {
						b.Fatal(err)
					}
				}
				if err := fan(ctx, cs, del); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
