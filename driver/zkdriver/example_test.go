package zkdriver_test

import (
	"context"
	"log"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/zkdriver"
	"github.com/go-zookeeper/zk"
)

// Connect makes a connection for the driver and waits for its session.
func ExampleConnect() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// go-zookeeper's own options can follow the driver's.
	d, err := zkdriver.Connect(ctx, []string{"127.0.0.1:2181"}, 20*time.Second, nil, zk.WithLogInfo(false))
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close() // closes the connection, which ends the session

	c := locker.New(d) // one Client per process; TTL 15s: within the 20s session
	defer c.Close(ctx)

	h, err := c.Mutex("orders/42").Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer h.Release(ctx)
	// Pass h.Token(), the node's czxid, with every write to the resource.
}

// A connection made with zk.Connect, with the application's own options.
func ExampleNew() {
	conn, _, err := zk.Connect([]string{"127.0.0.1:2181"}, 20*time.Second, zk.WithLogger(log.Default()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	// Other tenants of the ensemble cannot touch nodes with this ACL.
	if err := conn.AddAuth("digest", []byte("app:secret")); err != nil {
		log.Fatal(err)
	}
	d, err := zkdriver.New(conn, nil, &zkdriver.Options{
		Root: "/app/locks",
		ACL:  zk.DigestACL(zk.PermAll, "app", "secret"),
	})
	if err != nil {
		log.Fatal(err)
	}
	c := locker.New(d, locker.WithTTL(10*time.Second))
	defer c.Close(context.Background())

	rw := c.RWMutex("config")
	rw.RLock()
	defer rw.RUnlock()
}

// Keys that Java services lock with Curator's InterProcessReadWriteLock on
// /locker/<key>: the driver names its nodes as Curator does.
func ExampleLayout() {
	ctx := context.Background()
	d, err := zkdriver.Connect(ctx, []string{"127.0.0.1:2181"}, 20*time.Second,
		&zkdriver.Options{Layout: zkdriver.LayoutCuratorReadWrite})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	c := locker.New(d)
	defer c.Close(ctx)

	rw := c.RWMutex("inventory") // Curator: new InterProcessReadWriteLock(client, "/locker/inventory")
	rw.Lock()                    // excludes Curator's readers and writers too
	defer rw.Unlock()
}
