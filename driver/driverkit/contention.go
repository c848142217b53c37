package driverkit

import (
	"cmp"
	"sync"
	"time"
)

// Contention remembers the keys refused lately, for a driver whose
// TryAcquire reads before it writes on a key seen contended: on most
// backends a refused read costs less than a refused write (no log entry,
// no fsync) and leaves nothing behind, while on a free key the read would
// be a round trip for nothing. It is safe for concurrent use.
type Contention struct {
	// Window is how long a key counts as contended after its last
	// refusal (1 s if zero).
	Window time.Duration
	// Max bounds the keys remembered, least recently used first out
	// (1024 if zero).
	Max int

	mu   sync.Mutex
	last *LRU[string, time.Time] // by key: the time of the last refusal
}

// Refused records a refusal of key now.
func (c *Contention) Refused(key string) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last = NewLRU[string, time.Time](cmp.Or(c.Max, 1024))
	}
	c.last.Put(key, now)
}

// Free forgets key's refusals: it was found free.
func (c *Contention) Free(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last != nil {
		c.last.Delete(key)
	}
}

// Hot reports whether key was refused within Window.
func (c *Contention) Hot(key string) bool {
	c.mu.Lock()
	var t time.Time
	ok := false
	if c.last != nil {
		t, ok = c.last.Get(key)
	}
	c.mu.Unlock()
	return ok && time.Since(t) < cmp.Or(c.Window, time.Second)
}
