package redisdriver_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/redisdriver"
)

// TestErrorMessageNamesKeyOnce: through package locker, a redisdriver
// error is named once by operation and key (issue 30 saw
// `locker: acquire "s2": redisdriver: acquire "s2": limit differs…`),
// while the driver's error stays whole in the chain.
func TestErrorMessageNamesKeyOnce(t *testing.T) {
	srv := realServer(t)
	d := newDriver(t, newClient(t, srv.Addr))
	c := locker.New(d, locker.WithErrorHandler(func(error) {}))
	defer c.Close(context.Background())
	ctx := ctxT(t)
	key := uniqueKey(t, "s2")
	q := driver.QuoteKey(key)

	held, err := c.Semaphore(key, 2).Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	_, err = c.Semaphore(key, 3).Acquire(ctx, 1)
	if !errors.Is(err, locker.ErrLimitMismatch) {
		t.Fatalf("Acquire with another size: %v; want ErrLimitMismatch", err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "locker: acquire "+q+": redisdriver: ") || strings.Count(msg, q) != 1 || strings.Count(msg, "acquire") != 1 {
		t.Errorf("message %q; want `locker: acquire %s: redisdriver: …` naming the key and the operation once", msg, q)
	}
	// The driver's own error stays whole in the chain (errors.As finds
	// its OpError with Op and Key).
	found := false
	for e := err; e != nil; e = errors.Unwrap(e) {
		found = found || strings.HasPrefix(e.Error(), "redisdriver: acquire "+q+": ")
	}
	if !found {
		t.Errorf("the driver's error naming the key is not in the chain of %v", err)
	}

	// A closed go-redis client: a permanent error, named once too.
	rc := newClient(t, srv.Addr)
	d2, err := redisdriver.New(rc, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	err = locker.NewMutex(d2, key).LockContext(ctx)
	if msg := err.Error(); !driver.IsPermanent(err) || !strings.HasPrefix(msg, "locker: lock "+q+": redisdriver: ") || strings.Count(msg, q) != 1 {
		t.Errorf("lock on a closed client: %q; want one prefix, the key once, a permanent error", msg)
	}
	t.Log(err)
}
