// Package redismini runs the tests of redisdriver that need a Redis whose
// clock a test can stop: miniredis, a test-only dependency that must stay
// out of redisdriver's go.mod (a user's module graph reads every
// requirement of the modules they import).
package redismini

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/redis/go-redis/v9"
)

// TestTokensFrozenClock runs grants and releases that all fall in one
// microsecond of the server's clock (miniredis, whose clock the test
// stops): each release keeps its token, so the next grant's is greater.
func TestTokensFrozenClock(t *testing.T) {
	mr := miniredis.RunT(t)
	mr.SetTime(time.Now())
	c := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	d, err := redisdriver.New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k := drivertest.UniqueKey(t, "k")
	var last uint64
	for i := range 10 {
		r := driver.Request{Key: k, Owner: drivertest.Owner(), Mode: driver.Mode(i % 3 / 2), TTL: time.Second}
		l, err := d.TryAcquire(ctx, r)
		if err != nil {
			t.Fatalf("grant %d: %v", i, err)
		}
		if l.Token <= last {
			t.Fatalf("grant %d in a stopped clock: token %d after %d", i, l.Token, last)
		}
		last = l.Token
		if err := d.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
}
