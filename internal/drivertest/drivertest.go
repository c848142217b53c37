// Package drivertest holds the helpers that the tests of locker's own
// driver packages share: fresh owners and keys, a context bounded for a
// test, and a checked TryAcquire. (Third-party drivers use lockertest.)
package drivertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
)

// Owner returns a fresh owner string of 32 hex digits.
func Owner() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

var keySeq atomic.Uint64

// UniqueKey returns a lock key that no other test on a shared server
// uses: tb's name, name, the time of day to the nanosecond and a letter
// from a counter.
func UniqueKey(tb testing.TB, name string) string {
	return tb.Name() + "/" + name + "#" + time.Now().Format("150405.000000000") + "-" +
		string(rune('a'+keySeq.Add(1)%26))
}

// Context returns a context that ends after timeout or when tb ends.
func Context(tb testing.TB, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	tb.Cleanup(cancel)
	return ctx
}

// MustAcquire calls d.TryAcquire(ctx, r) and fails tb unless it granted a
// lease with a token and r's key, owner and mode, and, when ttl is not 0,
// a TTL of ttl.
func MustAcquire(ctx context.Context, tb testing.TB, d driver.Driver, r driver.Request, ttl time.Duration) driver.Lease {
	tb.Helper()
	l, err := d.TryAcquire(ctx, r)
	if err != nil {
		tb.Fatalf("TryAcquire(%q, %s, %v): %v", r.Key, r.Mode, r.TTL, err)
	}
	if l.Token == 0 || l.Key != r.Key || l.Owner != r.Owner || l.Mode != r.Mode || (ttl != 0 && l.TTL != ttl) {
		tb.Fatalf("TryAcquire(%+v) = %+v", r, l)
	}
	return l
}

// Acquired is what an Acquire returned.
type Acquired struct {
	Lease driver.Lease
	Err   error
}

// AcquireAsync runs a.Acquire(ctx, r) in a goroutine and returns the
// channel that receives its result.
func AcquireAsync(ctx context.Context, a driver.Acquirer, r driver.Request) <-chan Acquired {
	c := make(chan Acquired, 1)
	go func() {
		l, err := a.Acquire(ctx, r)
		c <- Acquired{l, err}
	}()
	return c
}
