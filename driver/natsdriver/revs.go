package natsdriver

import (
	"sync"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
)

// revCacheSize bounds the keys whose last revision a driver remembers.
const revCacheSize = 4096

// seen is what a driver last wrote, or saw, as the last message of a
// key's subject: its hold (owner and token) or a marker (no owner).
type seen struct {
	seq   uint64
	owner string
	token uint64
	value string
	at    time.Time // when it was written or seen, on the local clock
}

// revCache remembers the last revision of the keys a driver used lately,
// so that a call can write conditionally on it without reading it first:
// a grant over the marker of a release or an expiry, the refresh or
// release of the driver's own hold, each in one round trip instead of
// two or three. A guess that is wrong (another client wrote since) only
// makes the write fail its condition, and the call then reads the key as
// it would without the cache. The bench's uncontended and contended
// cells show what it buys (BENCHMARKS.md).
type revCache struct {
	mu  sync.Mutex
	lru *driverkit.LRU[string, seen]
}

func (c *revCache) init() { c.lru = driverkit.NewLRU[string, seen](revCacheSize) }

// put records s as the last message of subj.
func (c *revCache) put(subj string, s seen) {
	s.at = time.Now()
	c.mu.Lock()
	c.lru.Put(subj, s)
	c.mu.Unlock()
}

// drop forgets subj: its last revision is not what the cache says.
func (c *revCache) drop(subj string) {
	c.mu.Lock()
	c.lru.Delete(subj)
	c.mu.Unlock()
}

// freeSeq returns the revision a grant of subj should expect: that of a
// marker seen less than MarkerTTL ago (an older one has likely expired,
// leaving no message), or 0.
func (c *revCache) freeSeq(subj string) uint64 {
	c.mu.Lock()
	s, ok := c.lru.Get(subj)
	c.mu.Unlock()
	if !ok || s.owner != "" || time.Since(s.at) >= MarkerTTL {
		return 0
	}
	return s.seq
}

// hold returns l's hold as the driver last wrote it, with the revision
// of that message, when it knows it.
func (c *revCache) hold(subj string, l driver.Lease) (hold, bool) {
	c.mu.Lock()
	s, ok := c.lru.Get(subj)
	c.mu.Unlock()
	if !ok || s.owner != l.Owner || (!l.Abandoned && s.token != l.Token) {
		return hold{}, false
	}
	return hold{owner: s.owner, token: s.token, value: s.value, seq: s.seq}, true
}
