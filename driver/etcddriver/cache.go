package etcddriver

import "sync"

// A cache maps keys to values, keeping at most max of them: once full, it
// empties itself before it takes the next one. It is safe for concurrent
// use; the zero value with max set is an empty cache.
type cache[K comparable, V any] struct {
	max int
	mu  sync.Mutex
	m   map[K]V
}

// load returns the value of k, if the cache has one.
func (c *cache[K, V]) load(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

// store sets the value of k.
func (c *cache[K, V]) store(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[K]V)
	}
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[k] = v
}
