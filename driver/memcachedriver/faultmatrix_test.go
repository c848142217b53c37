package memcachedriver_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memcachedriver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/faultmatrix"
	"github.com/go-locker/locker/internal/memcachedtest"
)

// matrixTTL is the lease length of the fault matrix on memcached: the
// driver's shortest. matrixTimeout is its clients' gomemcache Timeout.
const (
	matrixTTL     = memcachedriver.MinTTL
	matrixTimeout = 500 * time.Millisecond
)

// dialMatrix opens a client of the fault matrix: gomemcache's Timeout
// bounds each request, and the driver returns by its context's deadline.
func dialMatrix(addr string) (driver.Driver, func() error, error) {
	c := memcache.New(addr)
	c.Timeout = matrixTimeout
	c.MaxIdleConns = 16
	d, err := memcachedriver.New(c, nil)
	if err != nil {
		return nil, nil, err
	}
	return d, func() error {
		_ = d.Close()
		return c.Close()
	}, nil
}

// TestFaultMatrix runs the fault matrix on a memcached of its own, with
// every client behind a fault proxy. memcached keeps nothing on disk, so
// a kill and restart loses the holds and the fence counters; the counters
// are then created again from the clock, and tokens keep increasing (one
// machine, one clock), which the restart cell checks as durable tokens.
func TestFaultMatrix(t *testing.T) {
	drivertest.Long(t, "the fault matrix runs for minutes")
	srv := memcachedtest.Private(t)
	// The administrator's requests go over fresh connections (Do): a
	// pooled one would be broken by the restart cell.
	holdKey := func(key string) string {
		hk, _ := memcachedriver.ItemKeys(memcachedriver.DefaultPrefix, key)
		return hk
	}
	tg := faultmatrix.ProcessTarget("memcached", matrixTTL, srv.Addr, dialMatrix, srv)
	tg.Revoke = func(ctx context.Context, key string) error {
		reply, err := memcachedtest.Do(srv.Addr, "delete "+holdKey(key))
		if err == nil && reply != "DELETED" && reply != "NOT_FOUND" {
			err = fmt.Errorf("delete: %q", reply)
		}
		return err
	}
	// Residue counts the hold item, pending or granted, while it exists
	// on the server: it blocks the key, whatever the time left of the
	// lease it records.
	tg.Residue = func(ctx context.Context, key string) (int, error) {
		reply, err := memcachedtest.Do(srv.Addr, "get "+holdKey(key))
		switch {
		case err != nil:
			return 0, err
		case reply == "END":
			return 0, nil
		}
		return 1, nil
	}
	// A restart loses the holds: the history is checked per epoch
	// (DurableTokens stays false). Tokens keep increasing across it
	// nonetheless (the fence counters are created again from the clock),
	// which the cell would note otherwise, and TestTokensAcrossRestart
	// checks.
	faultmatrix.Run(t, tg)
}
