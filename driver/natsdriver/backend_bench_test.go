package natsdriver_test

import (
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/natsdriver"
	"github.com/go-locker/locker/internal/natstest"
	"github.com/go-locker/locker/internal/proc"
	"github.com/go-locker/locker/internal/recipebench"
)

// BenchmarkBackend measures one key contended by separate clients and
// many distinct keys of one client (see recipebench.Backend), on the
// package's nats-server (default sync interval):
//
//	go test -run '^$' -bench Backend -benchtime 400x
func BenchmarkBackend(b *testing.B) {
	if sharedServer == nil {
		proc.SkipOrFail(b, "natsdriver", sharedServerErr, natstest.ErrNotInstalled)
	}
	recipebench.Backend(b, func(b *testing.B) driver.Driver {
		nc, err := connect(sharedServer.URL)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(nc.Close)
		d, err := natsdriver.NewConn(b.Context(), nc, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = d.Close() })
		return d
	})
}
