package driverkit_test

import (
	"testing"

	"github.com/go-locker/locker/driver/driverkit"
)

func TestLRU(t *testing.T) {
	c := driverkit.NewLRU[string, int](3)
	c.Put("a", 1)
	c.Put("b", 2)
	c.Put("c", 3)
	if v, ok := c.Get("a"); !ok || v != 1 { // a is now the most recently used
		t.Fatalf(`get("a") = %d, %v`, v, ok)
	}
	c.Put("d", 4) // evicts b, the least recently used
	if _, ok := c.Get("b"); ok {
		t.Error(`"b" survived the eviction`)
	}
	for k, want := range map[string]int{"a": 1, "c": 3, "d": 4} {
		if v, ok := c.Get(k); !ok || v != want {
			t.Errorf("get(%q) = %d, %v; want %d", k, v, ok, want)
		}
	}
	c.Put("c", 30) // an update does not evict
	if v, _ := c.Get("c"); v != 30 || c.Len() != 3 {
		t.Errorf(`after put("c", 30): get("c") = %d, len %d`, v, c.Len())
	}
	c.Delete("a")
	c.Delete("x")
	if _, ok := c.Get("a"); ok || c.Len() != 2 {
		t.Errorf(`after delete("a"): len %d`, c.Len())
	}
	for i := range 100 {
		c.Put(string(rune('A'+i)), i)
	}
	if c.Len() != 3 {
		t.Errorf("len after 100 puts = %d; want the bound, 3", c.Len())
	}
}
