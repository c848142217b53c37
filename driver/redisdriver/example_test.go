package redisdriver_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/redis/go-redis/v9"
)

// A lock on Redis: one Client per process, shared by every handle, and
// holds from it.
func Example() {
	// A client made with go-redis's defaults: the driver ends each of its
	// calls at its context's deadline.
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close() // the driver never closes the client

	d, err := redisdriver.New(rdb, nil)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	c := locker.New(d)
	defer c.Close(ctx) // releases every hold at once

	h, err := c.Mutex("orders/42").Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer h.Release(ctx)
	// Work under h.Context() stops if the hold is lost; pass h.Token()
	// with every write to the resource.
	fmt.Println("holding orders/42 with fencing token", h.Token())
}

// Applications use the driver through package locker; this example calls
// it directly to show what a driver does.
func Example_driver() {
	// A client made with go-redis's defaults: the driver ends each of its
	// calls at its context's deadline.
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close() // the driver never closes the client

	d, err := redisdriver.New(rdb, nil)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	lease, err := d.TryAcquire(ctx, driver.Request{
		Key:   "orders/42",
		Owner: "0123456789abcdef0123456789abcdef",
		Mode:  driver.Exclusive,
		TTL:   10 * time.Second,
	})
	var locked *driver.LockedError
	switch {
	case errors.As(err, &locked):
		fmt.Println("busy for up to", locked.Remaining)
		return
	case err != nil:
		log.Fatal(err)
	}
	// Pass lease.Token to the storage you protect, which rejects writes
	// carrying a token lower than one it has seen.
	fmt.Println("fencing token", lease.Token)

	if lease, err = d.Refresh(ctx, lease); err != nil {
		log.Fatal(err)
	}
	if err := d.Release(ctx, lease); err != nil {
		log.Fatal(err)
	}
}
