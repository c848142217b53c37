package redisdriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/go-locker/locker/internal/drivertest"
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

// TestFaultMatrix runs the fault matrix on a redis-server of its own, with
// every client behind a fault proxy. The server keeps nothing on disk, so
// a kill and restart loses the holds; the tokens, taken from the server's
// clock, still increase across it, and the restart cell checks that they
// do.
func TestFaultMatrix(t *testing.T) {
	drivertest.Long(t, "the fault matrix runs for about a minute")
	srv := testserver.PrivateRedis(t)
	admin, err := redisdriver.New(newClient(t, srv.Addr), nil)
	if err != nil {
		t.Fatal(err)
	}
	tg := faultmatrix.ProcessTarget("redis", matrixTTL, srv.Addr, dialMatrix, srv)
	tg.Revoke = func(ctx context.Context, key string) error {
		_, err := admin.ForceRelease(ctx, key)
		return err
	}
	tg.Residue = func(ctx context.Context, key string) (int, error) {
		st, err := admin.Inspect(ctx, key)
		return len(st.Holders) + st.Waiting, err
	}
	tg.IncreasingTokens = true
	faultmatrix.Run(t, tg)
}
