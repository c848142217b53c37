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

	// TTLs are whole seconds, at least 3.
	m := locker.NewMutex(d, "reports/daily", locker.WithTTL(10*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := m.LockContext(ctx); err != nil {
		log.Fatal(err)
	}
	defer m.Unlock()
	fmt.Println("fencing token", m.Token())
}
