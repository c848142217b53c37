// Command user is the program installcheck builds in a fresh module of its
// own, after go get of locker's modules from the packed proxy, as a user
// would: it imports the root package, drivers and the otel module, locks
// a key over the in-process driver with the OpenTelemetry observer, and
// makes a Redis and a ZooKeeper driver without reaching a server.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/memdriver"
	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/go-locker/locker/driver/zkdriver"
	lockerotel "github.com/go-locker/locker/otel"
	"github.com/redis/go-redis/v9"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "user:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	obs, err := lockerotel.NewObserver(lockerotel.WithBackend("memory"))
	if err != nil {
		return err
	}
	c := locker.New(memdriver.New(), locker.WithObserver(obs))
	m := c.Mutex("installcheck")
	m.Lock()
	fmt.Println("locked installcheck, token", m.Token())
	m.Unlock()
	if err := c.Close(ctx); err != nil {
		return err
	}

	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	if _, err := redisdriver.New(rdb, nil); err != nil {
		return err
	}
	if _, err := zkdriver.New(nil, nil, nil); err == nil {
		return fmt.Errorf("zkdriver.New accepted a nil connection")
	}
	fmt.Println("made a redisdriver and a zkdriver")
	return nil
}
