package memcachedriver_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memcachedriver"
	"github.com/go-locker/locker/internal/memcachedtest"
	"github.com/go-locker/locker/internal/recipebench"
)

// BenchmarkBackend measures one key contended by separate clients and
// many distinct keys of one client (see recipebench.Backend):
//
//	go test -run '^$' -bench Backend -benchtime 400x
func BenchmarkBackend(b *testing.B) {
	if sharedServer == nil {
		memcachedtest.SkipOrFail(b, sharedServerErr)
	}
	recipebench.Backend(b, func(b *testing.B) driver.Driver {
		c := memcache.New(sharedServer.Addr)
		c.Timeout = clientTimeout
		c.MaxIdleConns = 16
		b.Cleanup(func() { _ = c.Close() })
		d, err := memcachedriver.New(c, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = d.Close() })
		return d
	})
}

// BenchmarkMultiLock measures recipebench.MultiLock at a TTL of 3s, the
// shortest the driver takes: 4 clients × 2 goroutines multi-locking the
// same 4 keys; max-wait-ms is the longest a lock call waited:
//
//	go test -run '^$' -bench 'MultiLock$' -benchtime 3000x -count 10
//
// With LOCKER_MULTILOCK_KEYS set, it runs one client's share (2
// goroutines) on keys named by it, so that 4 processes started at once
// against one memcached (LOCKER_MEMCACHED_ADDR) contend as 4 processes:
//
//	go test -c -o mc.test
//	for i in 1 2 3 4; do LOCKER_MEMCACHED_ADDR=127.0.0.1:11211 LOCKER_MULTILOCK_KEYS=run1 \
//		./mc.test -test.run '^$' -test.bench 'MultiLock$' -test.benchtime 750x & done; wait
func BenchmarkMultiLock(b *testing.B) {
	if sharedServer == nil {
		memcachedtest.SkipOrFail(b, sharedServerErr)
	}
	procs, base := recipebench.MultiProcs, fmt.Sprintf("multilock/%d", time.Now().UnixNano())
	if k := os.Getenv("LOCKER_MULTILOCK_KEYS"); k != "" {
		procs, base = 1, "multilock/"+k
	}
	recipebench.MultiLock(b, func(b *testing.B) driver.Driver {
		c := memcache.New(sharedServer.Addr)
		c.Timeout = clientTimeout
		c.MaxIdleConns = 16
		b.Cleanup(func() { _ = c.Close() })
		d, err := memcachedriver.New(c, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = d.Close() })
		return d
	}, 3*time.Second, procs, base)
}
