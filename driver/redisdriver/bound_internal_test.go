package redisdriver

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestBindingsFreed: the bindings and stall guards of clients that are no
// longer used are deleted once the clients are collected (a binding that
// held its client would keep every client a process ever made alive).
func TestBindingsFreed(t *testing.T) {
	count := func(m *sync.Map) (n int) {
		m.Range(func(any, any) bool { n++; return true })
		return n
	}
	before := count(&bound) + count(&guards)
	for range 20 {
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
		bind(c)
		guardOf(c)
		_ = c.Close()
	}
	if n := count(&bound) + count(&guards); n < before+40 {
		t.Fatalf("%d bindings and guards after binding 20 clients; want %d", n, before+40)
	}
	deadline := time.Now().Add(5 * time.Second)
	for count(&bound)+count(&guards) > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d bindings and guards of collected clients are left", count(&bound)+count(&guards)-before)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}
