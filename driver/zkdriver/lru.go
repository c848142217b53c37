package zkdriver

import "container/list"

// An lru is a map bounded to max entries: to make room for a new key it
// evicts the least recently used entry (read by get or written by put).
//
// The driver keeps what it learnt about other clients' keys in lrus (hot
// keys, queue snapshots, observed nodes): all of it is an optimisation
// that the driver can do without, so a key seen once goes when max newer
// ones have been seen since, while the keys in use stay. Clearing the
// whole map when it is full instead would make every contended key lose
// its state at once: a snapshot costs a listing, an observed node's expiry
// is timed anew, a full TTL later.
//
// It is not safe for concurrent use: the driver guards its lrus with its
// mutex.
type lru[K comparable, V any] struct {
	max   int
	items map[K]*list.Element // Value: *lruItem[K, V]
	order list.List           // most recently used first
}

type lruItem[K comparable, V any] struct {
	key K
	val V
}

// newLRU returns an empty lru of at most max entries (max ≥ 1).
func newLRU[K comparable, V any](max int) *lru[K, V] {
	return &lru[K, V]{max: max, items: make(map[K]*list.Element)}
}

// get returns the value of k and marks it used.
func (c *lru[K, V]) get(k K) (V, bool) {
	e, ok := c.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*lruItem[K, V]).val, true
}

// put sets the value of k, evicting the least recently used entry if the
// lru is full.
func (c *lru[K, V]) put(k K, v V) {
	if e, ok := c.items[k]; ok {
		e.Value.(*lruItem[K, V]).val = v
		c.order.MoveToFront(e)
		return
	}
	if len(c.items) >= c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*lruItem[K, V]).key)
	}
	c.items[k] = c.order.PushFront(&lruItem[K, V]{k, v})
}

// delete removes k.
func (c *lru[K, V]) delete(k K) {
	if e, ok := c.items[k]; ok {
		c.order.Remove(e)
		delete(c.items, k)
	}
}

// len returns the number of entries.
func (c *lru[K, V]) len() int { return len(c.items) }
