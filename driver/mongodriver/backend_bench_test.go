package mongodriver_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/mongodriver"
	"github.com/go-locker/locker/internal/ferrettest"
	"github.com/go-locker/locker/internal/recipebench"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// BenchmarkBackend measures one key contended by separate clients and
// many distinct keys of one client (see recipebench.Backend), each run in
// a database of its own on the shared FerretDB:
//
//	go test -run '^$' -bench Backend -benchtime 400x
func BenchmarkBackend(b *testing.B) {
	if sharedServer == nil {
		ferrettest.SkipOrFail(b, sharedServerErr)
	}
	db := "b_" + owner()[:12]
	recipebench.Backend(b, func(b *testing.B) driver.Driver {
		d, err := mongodriver.New(connect(b, sharedServer.URI), &mongodriver.Options{Database: db})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = d.Close() })
		return d
	})
}

// BenchmarkRecipes measures an uncontended Mutex pair, a Semaphore
// permit pair and an election handoff (see recipebench.Run):
//
//	go test -run '^$' -bench Recipes -benchtime 300x
func BenchmarkRecipes(b *testing.B) {
	if sharedServer == nil {
		ferrettest.SkipOrFail(b, sharedServerErr)
	}
	db := "r_" + owner()[:12]
	recipebench.Run(b, func(b *testing.B) driver.Driver {
		d, err := mongodriver.New(connect(b, sharedServer.URI), &mongodriver.Options{Database: db})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = d.Close() })
		return d
	})
}

// BenchmarkPairCommands counts the commands an uncontended Acquire and
// Release of one key by one Client send, by name (find, insert, delete
// by the collector, hello for the clock): exact counts, unlike the rates.
//
//	go test -run '^$' -bench PairCommands -benchtime 200x
func BenchmarkPairCommands(b *testing.B) {
	if sharedServer == nil {
		ferrettest.SkipOrFail(b, sharedServerErr)
	}
	var mu sync.Mutex
	counts := map[string]int{}
	mon := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		mu.Lock()
		counts[e.CommandName]++
		mu.Unlock()
	}}
	c, err := mongo.Connect(clientOptions(sharedServer.URI).SetMonitor(mon))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	d, err := mongodriver.New(c, &mongodriver.Options{Database: "c_" + owner()[:12]})
	if err != nil {
		b.Fatal(err)
	}
	lc := locker.New(d, locker.WithTTL(10*time.Second))
	m := lc.Mutex("pair/" + owner())
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		h, err := m.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := h.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	_ = lc.Close(ctx)
	_ = d.Close()
	mu.Lock()
	defer mu.Unlock()
	for _, name := range []string{"find", "insert", "delete", "hello"} {
		b.ReportMetric(float64(counts[name])/float64(b.N), name+"/pair")
	}
}
