//go:build go1.25

package driverkit_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
)

// received reports whether c holds a value, taking it.
func received(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func TestFanoutWake(t *testing.T) {
	var f driverkit.Fanout
	a1, a2, b := f.Subscribe("a"), f.Subscribe("a"), f.Subscribe("b")
	if f.Count("a") != 2 || f.Count("b") != 1 || f.Count("c") != 0 || f.Total() != 3 {
		t.Fatalf("counts a=%d b=%d c=%d total=%d", f.Count("a"), f.Count("b"), f.Count("c"), f.Total())
	}
	if a1.Key() != "a" || b.Key() != "b" {
		t.Fatalf("keys %q %q", a1.Key(), b.Key())
	}
	// Wake-ups coalesce in the one-value buffer and never block.
	f.Wake("a")
	f.Wake("a")
	f.Wake("c") // nobody: nothing happens
	if !received(a1.C()) || !received(a2.C()) {
		t.Fatal("a subscription of a was not woken")
	}
	if received(a1.C()) || received(b.C()) {
		t.Fatal("wake-ups did not coalesce, or b was woken by a's")
	}
	f.WakeAll()
	for _, s := range []*driverkit.FanoutSub{a1, a2, b} {
		if !received(s.C()) {
			t.Fatalf("WakeAll missed %s", s.Key())
		}
	}
	// A closed subscription hears nothing more.
	if err := a1.Close(); err != nil {
		t.Fatal(err)
	}
	f.Wake("a")
	if received(a1.C()) || !received(a2.C()) {
		t.Fatal("after Close of a1: wrong wake-ups")
	}
	if f.Count("a") != 1 || f.Total() != 2 {
		t.Fatalf("after Close: a=%d total=%d", f.Count("a"), f.Total())
	}
}

func TestFanoutOnClose(t *testing.T) {
	var calls []string
	var counts []int
	f := &driverkit.Fanout{}
	f.OnClose = func(key string) {
		calls = append(calls, key)
		counts = append(counts, f.Count(key)) // no deadlock: called outside f's lock
	}
	a1, a2 := f.Subscribe("a"), f.Subscribe("a")
	_ = a1.Close()
	_ = a1.Close() // the second Close does nothing
	_ = a2.Close()
	if len(calls) != 2 || counts[0] != 1 || counts[1] != 0 || f.Total() != 0 {
		t.Fatalf("OnClose calls %v with counts %v, total %d", calls, counts, f.Total())
	}
}

// TestFanoutConcurrent subscribes, wakes and closes from many goroutines,
// for the race detector, and checks the counts at the end.
func TestFanoutConcurrent(t *testing.T) {
	var closed atomic.Int32
	f := &driverkit.Fanout{OnClose: func(string) { closed.Add(1) }}
	var wg sync.WaitGroup
	keys := []string{"x", "y", "z"}
	for i := range 16 {
		wg.Go(func() {
			for j := range 200 {
				key := keys[(i+j)%len(keys)]
				s := f.Subscribe(key)
				f.Wake(keys[j%len(keys)])
				if j%10 == 0 {
					f.WakeAll()
				}
				received(s.C())
				_ = s.Close()
			}
		})
	}
	wg.Wait()
	if f.Total() != 0 || closed.Load() != 16*200 {
		t.Fatalf("total %d, %d OnClose calls; want 0, %d", f.Total(), closed.Load(), 16*200)
	}
}

// A driver's Subscribe returns a FanoutSub once it listens for the key; its
// listening goroutine wakes the key's subscribers on each release it hears.
func ExampleFanout() {
	var mu sync.Mutex // the driver's lock: what it listens to
	listening := map[string]bool{}
	f := &driverkit.Fanout{}
	f.OnClose = func(key string) {
		mu.Lock()
		defer mu.Unlock()
		if f.Count(key) == 0 {
			delete(listening, key) // stop listening: nobody waits on key
		}
	}
	subscribe := func(key string) driver.Subscription {
		mu.Lock()
		defer mu.Unlock()
		listening[key] = true // start listening before the subscriber returns
		return f.Subscribe(key)
	}

	sub := subscribe("jobs/42")
	f.Wake("jobs/42") // the listener heard a release
	<-sub.C()
	fmt.Println("woken")
	_ = sub.Close()
	fmt.Println(len(listening))
	// Output:
	// woken
	// 0
}
