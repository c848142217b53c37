package mongodriver

import (
	"sync"

	"github.com/go-locker/locker/driver/driverkit"
)

// cacheSize bounds the keys whose last version a Driver remembers.
const cacheSize = 1024

// A versionCache remembers, per key, the current version that the
// driver's last change of the key read after its insert. A change of the
// key by the same driver computes from it and saves its first read: a
// stale version costs an insert refused with a duplicate key error (or
// one not in force, which the check after it catches), after which the
// change reads the key. Only changes that write use it: a refusal is
// always decided on a version just read.
type versionCache struct {
	mu  sync.Mutex
	lru *driverkit.LRU[string, *version]
}

func (c *versionCache) get(key string) *version {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lru == nil {
		return nil
	}
	v, _ := c.lru.Get(key)
	return v
}

func (c *versionCache) put(key string, v *version) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lru == nil {
		c.lru = driverkit.NewLRU[string, *version](cacheSize)
	}
	c.lru.Put(key, v)
}

func (c *versionCache) drop(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lru != nil {
		c.lru.Delete(key)
	}
}
