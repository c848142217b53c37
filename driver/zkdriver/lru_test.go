package zkdriver

import "testing"

func TestLRU(t *testing.T) {
	c := newLRU[string, int](3)
	c.put("a", 1)
	c.put("b", 2)
	c.put("c", 3)
	if v, ok := c.get("a"); !ok || v != 1 { // a is now the most recently used
		t.Fatalf(`get("a") = %d, %v`, v, ok)
	}
	c.put("d", 4) // evicts b, the least recently used
	if _, ok := c.get("b"); ok {
		t.Error(`"b" survived the eviction`)
	}
	for k, want := range map[string]int{"a": 1, "c": 3, "d": 4} {
		if v, ok := c.get(k); !ok || v != want {
			t.Errorf("get(%q) = %d, %v; want %d", k, v, ok, want)
		}
	}
	c.put("c", 30) // an update does not evict
	if v, _ := c.get("c"); v != 30 || c.len() != 3 {
		t.Errorf(`after put("c", 30): get("c") = %d, len %d`, v, c.len())
	}
	c.delete("a")
	c.delete("x")
	if _, ok := c.get("a"); ok || c.len() != 2 {
		t.Errorf(`after delete("a"): len %d`, c.len())
	}
	for i := range 100 {
		c.put(string(rune('A'+i)), i)
	}
	if c.len() != 3 {
		t.Errorf("len after 100 puts = %d; want the bound, 3", c.len())
	}
}
