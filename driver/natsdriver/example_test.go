package natsdriver_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/natsdriver"
	"github.com/nats-io/nats.go"
)

// The driver takes the application's connection (or its
// jetstream.JetStream, with natsdriver.New) and opens the bucket of the
// locks, creating it with the settings it needs when it does not exist.
func Example() {
	nc, err := nats.Connect("nats://localhost:4222")
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close() // the driver never closes the connection

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// In a cluster, a bucket of three replicas keeps the holds across
	// the loss of a server.
	d, err := natsdriver.NewConn(ctx, nc, &natsdriver.Options{Bucket: "locks", Replicas: 3})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()

	// One Client per process, shared by every handle. TTLs are whole
	// seconds, above the cluster's election time.
	c := locker.New(d, locker.WithTTL(15*time.Second))
	defer c.Close(ctx)

	h, err := c.Mutex("reports/daily").Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer h.Release(ctx)
	fmt.Println("fencing token", h.Token())
}
