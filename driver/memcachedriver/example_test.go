package memcachedriver_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/memcachedriver"
)

// A memcached that holds locks should run with -M, so that it refuses
// writes when full instead of evicting holds.
func Example() {
	mc := memcache.New("localhost:11211")
	mc.Timeout = 500 * time.Millisecond // well below the TTL
	mc.MaxIdleConns = 16                // the calls expected at once
	defer mc.Close()                    // the driver never closes the client

	d, err := memcachedriver.New(mc, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// One Client per process, shared by every handle. TTLs are whole
	// seconds, at least 3.
	c := locker.New(d, locker.WithTTL(10*time.Second))
	defer c.Close(ctx)

	h, err := c.Mutex("reports/daily").Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer h.Release(ctx)
	fmt.Println("fencing token", h.Token())
}
