package memcachedriver_test

import (
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
//	go test -run '^$' -bench MultiLock -benchtime 400x -count 10
func BenchmarkMultiLock(b *testing.B) {
	if sharedServer == nil {
		memcachedtest.SkipOrFail(b, sharedServerErr)
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
	}, 3*time.Second)
}
