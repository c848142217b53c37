package etcddriver

import "testing"

// TestCache: a cache returns what was stored and empties itself when full.
func TestCache(t *testing.T) {
	c := cache[string, int]{max: 2}
	if _, ok := c.load("a"); ok {
		t.Fatal("an empty cache has a value")
	}
	c.store("a", 1)
	c.store("b", 2)
	if v, ok := c.load("a"); !ok || v != 1 {
		t.Fatalf("load(a) = %d, %v; want 1, true", v, ok)
	}
	c.store("b", 3) // full: emptied, then b
	if _, ok := c.load("a"); ok {
		t.Error("a full cache kept its old entries")
	}
	if v, ok := c.load("b"); !ok || v != 3 {
		t.Errorf("load(b) = %d, %v; want 3, true", v, ok)
	}
}
