package mongodriver_test

import (
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/mongodriver"
	"github.com/go-locker/locker/internal/ferrettest"
	"github.com/go-locker/locker/internal/recipebench"
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
