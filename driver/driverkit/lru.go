package driverkit

import "container/list"

// An LRU is a map bounded to max entries: to make room for a new key it
// evicts the least recently used entry (read by Get or written by Put).
//
// A driver keeps in LRUs what it learns about keys to save requests (keys
// seen contended, queue snapshots, key nodes known to exist): all of it is
// an optimisation the driver can do without, so a key seen once goes when
// max newer ones have been seen since, while the keys in use stay.
// Clearing the whole map when it is full instead would make every key in
// use lose its state at once.
//
// It is not safe for concurrent use: the driver guards its LRUs with its
// own mutex.
type LRU[K comparable, V any] struct {
	max   int
	items map[K]*list.Element // Value: *lruItem[K, V]
	order list.List           // most recently used first
}

type lruItem[K comparable, V any] struct {
	key K
	val V
}

// NewLRU returns an empty LRU of at most max entries (max ≥ 1).
func NewLRU[K comparable, V any](max int) *LRU[K, V] {
	return &LRU[K, V]{max: max, items: make(map[K]*list.Element)}
}

// Get returns the value of k and marks it used.
func (c *LRU[K, V]) Get(k K) (V, bool) {
	e, ok := c.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*lruItem[K, V]).val, true
}

// Put sets the value of k, evicting the least recently used entry if the
// LRU is full.
func (c *LRU[K, V]) Put(k K, v V) {
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

// Delete removes k.
func (c *LRU[K, V]) Delete(k K) {
	if e, ok := c.items[k]; ok {
		c.order.Remove(e)
		delete(c.items, k)
	}
}

// Len returns the number of entries.
func (c *LRU[K, V]) Len() int { return len(c.items) }
