package locker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
	"github.com/go-locker/locker/internal/recipebench"
)

// BenchmarkMutexUncontended measures one lock+unlock pair on memdriver: the
// front-end's own cost plus memdriver's (compare BenchmarkMemdriverRaw).
func BenchmarkMutexUncontended(b *testing.B) {
	m := locker.NewMutex(memdriver.New(), "bench")
	b.ReportAllocs()
	for b.Loop() {
		m.Lock()
		m.Unlock()
	}
}

// BenchmarkMemdriverRaw is the same pair on memdriver without the front-end.
func BenchmarkMemdriverRaw(b *testing.B) {
	d := memdriver.New()
	ctx := context.Background()
	req := driverRequest("bench")
	b.ReportAllocs()
	for b.Loop() {
		l, err := d.TryAcquire(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if err := d.Release(ctx, l); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMutexParallelDistinctKeys(b *testing.B) {
	d := memdriver.New()
	var mu sync.Mutex
	n := 0
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		n++
		m := locker.NewMutex(d, fmt.Sprintf("bench/%d", n))
		mu.Unlock()
		for pb.Next() {
			m.Lock()
			m.Unlock()
		}
	})
}

func BenchmarkMutexContended(b *testing.B) {
	d := memdriver.New()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		m := locker.NewMutex(d, "bench")
		for pb.Next() {
			m.Lock()
			m.Unlock()
		}
	})
}

func BenchmarkRWMutexRead(b *testing.B) {
	rw := locker.NewRWMutex(memdriver.New(), "bench")
	b.ReportAllocs()
	for b.Loop() {
		rw.RLock()
		rw.RUnlock()
	}
}

// BenchmarkRecipes runs the recipes' benchmarks on memdriver; each driver
// package runs them on its backend.
func BenchmarkRecipes(b *testing.B) {
	back := memdriver.NewBackend()
	recipebench.Run(b, func(*testing.B) driver.Driver { return back.Driver() })
}
