// Package recipebench measures package locker on a driver, so that each
// driver package's benchmarks report the same cells: [Run] the recipes
// (Semaphore, Election) beside a Mutex, [Backend] one contended key and
// many distinct keys.
//
//	go test -run '^$' -bench Recipes ./driver/...
//	go test -run '^$' -bench Backend -benchtime 400x ./driver/...
package recipebench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
)

// Run runs the sub-benchmarks MutexPair, PermitPair and ElectionHandoff on
// drivers made by mk, each a separate client of one backend. A driver that
// lacks a recipe's capability skips its sub-benchmark.
func Run(b *testing.B, mk func(b *testing.B) driver.Driver) {
	b.Run("MutexPair", func(b *testing.B) { mutexPair(b, mk(b)) })
	b.Run("PermitPair", func(b *testing.B) { permitPair(b, mk(b)) })
	b.Run("ElectionHandoff", func(b *testing.B) { handoff(b, mk(b), mk(b)) })
}

func client(b *testing.B, d driver.Driver) *locker.Client {
	c := locker.New(d, locker.WithTTL(10*time.Second))
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

func key(b *testing.B) string {
	return fmt.Sprintf("recipebench/%s/%d", b.Name(), time.Now().UnixNano())
}

// mutexPair is an uncontended Acquire and Release of a Mutex: the
// reference for permitPair.
func mutexPair(b *testing.B, d driver.Driver) {
	m := client(b, d).Mutex(key(b))
	ctx := context.Background()
	for b.Loop() {
		h, err := m.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := h.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// permitPair is an uncontended Acquire(1) and Hold.Release of a permit of
// a semaphore of 4.
func permitPair(b *testing.B, d driver.Driver) {
	if !driver.CapabilitiesOf(d).Counted {
		b.Skipf("driver %T grants no counted requests", d)
	}
	s := client(b, d).Semaphore(key(b), 4)
	ctx := context.Background()
	for b.Loop() {
		h, err := s.Acquire(ctx, 1)
		if err != nil {
			b.Fatal(err)
		}
		if err := h.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// handoff measures a leadership handoff between two clients: from the
// leader's Resign to the return of the Campaign that the other client had
// begun before it (and that has waited 20 ms, not counted).
func handoff(b *testing.B, d1, d2 driver.Driver) {
	if caps := driver.CapabilitiesOf(d1); !caps.Values {
		b.Skipf("driver %T keeps no values", d1)
	} else if !caps.Inspect {
		b.Skipf("driver %T cannot be inspected", d1)
	}
	k := key(b)
	es := [2]*locker.Election{client(b, d1).Election(k), client(b, d2).Election(k)}
	ctx := context.Background()
	if _, err := es[0].Campaign(ctx, "0"); err != nil {
		b.Fatal(err)
	}
	var last locker.Token
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		leader, next := es[i%2], es[(i+1)%2]
		elected := make(chan *locker.Hold, 1)
		go func() {
			h, err := next.Campaign(ctx, fmt.Sprint((i+1)%2))
			if err != nil {
				b.Error(err)
			}
			elected <- h
		}()
		time.Sleep(20 * time.Millisecond)
		b.StartTimer()
		if err := leader.Resign(ctx); err != nil {
			b.Fatal(err)
		}
		h := <-elected
		if h == nil {
			b.FailNow()
		}
		if h.Token() <= last {
			b.Fatalf("term %d after %d", h.Token(), last)
		}
		last = h.Token()
	}
	b.StopTimer()
	_ = es[b.N%2].Resign(ctx)
}
