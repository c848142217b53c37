package redisdriver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/go-locker/locker/internal/faultmatrix"
	"github.com/go-locker/locker/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// matrixTTL is the lease length of the fault matrix on Redis.
const matrixTTL = 400 * time.Millisecond

// dialMatrix opens a client of the matrix: no retries by go-redis (the
// front-end retries with the same owner), every blocking call bounded by
// its context and by the TTL.
func dialMatrix(addr string) (driver.Driver, func() error, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: matrixTTL, ReadTimeout: matrixTTL, WriteTimeout: matrixTTL})
	d, err := redisdriver.New(c, nil)
	if err != nil {
		_ = c.Close()
		return nil, nil, err
	}
	return d, c.Close, nil
}

// matrixKeys returns the Redis keys that hold the holds and the waiters of
// a lock with the default prefix: its exclusive hold, its shared holds
// and its queue entries' expiries (see common.lua).
func matrixKeys(key string) []string {
	b := redisdriver.DefaultPrefix + "{" + strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D").Replace(key) + "}:"
	return []string{b + "lock", b + "readers", b + "queue-exp"}
}

// residueScript counts the live records of KEYS: the exclusive hold, and
// the shared holds and queue entries that have not expired (their scores
// are expiry times on the server's clock, in milliseconds).
var residueScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('EXISTS', KEYS[1]) + redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf') + redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf')
`)

// TestFaultMatrix runs the fault matrix on a redis-server of its own, with
// every client behind a fault proxy. The server keeps nothing on disk, so
// a kill and restart loses the holds; the tokens, taken from the server's
// clock, still increase across it, and the restart cell checks that they
// do.
func TestFaultMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("the fault matrix runs for about a minute; skipped with -short")
	}
	srv := testserver.PrivateRedis(t)
	admin := newClient(t, srv.Addr)
	faultmatrix.Run(t, faultmatrix.Target{
		Name: "redis",
		TTL:  matrixTTL,
		Addr: func() string { return srv.Addr },
		Dial: dialMatrix,
		Server: faultmatrix.Server{
			Pause: srv.Pause, Resume: srv.Resume,
			Kill: srv.Kill, Restart: srv.Restart,
		},
		Revoke: func(ctx context.Context, key string) error {
			return admin.Del(ctx, matrixKeys(key)[:2]...).Err()
		},
		Residue: func(ctx context.Context, key string) (int, error) {
			return residueScript.Run(ctx, admin, matrixKeys(key)).Int()
		},
		IncreasingTokens: true,
	})
}
