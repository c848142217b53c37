package memdriver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
)

const (
	ex = driver.Exclusive
	sh = driver.Shared
)

func rq(key, owner string, mode driver.Mode, ttl time.Duration) driver.Request {
	return driver.Request{Key: key, Owner: owner, Mode: mode, TTL: ttl}
}

func mustAcquire(t *testing.T, d *memdriver.Driver, r driver.Request) driver.Lease {
	t.Helper()
	l, err := d.TryAcquire(context.Background(), r)
	if err != nil {
		t.Fatalf("TryAcquire(%+v): %v", r, err)
	}
	if l.Key != r.Key || l.Owner != r.Owner || l.Mode != r.Mode || l.TTL != r.TTL || l.Token == 0 {
		t.Fatalf("TryAcquire(%+v) = %+v", r, l)
	}
	return l
}

// tryQueued is a TryAcquire with Request.Queued.
func tryQueued(d driver.Driver, ctx context.Context, r driver.Request) (driver.Lease, error) {
	r.Queued = true
	return d.TryAcquire(ctx, r)
}

func mustAcquireQueued(t *testing.T, d *memdriver.Driver, r driver.Request) driver.Lease {
	t.Helper()
	l, err := tryQueued(d, context.Background(), r)
	if err != nil {
		t.Fatalf("TryAcquireQueued(%+v): %v", r, err)
	}
	if l.Owner != r.Owner || l.Token == 0 {
		t.Fatalf("TryAcquireQueued(%+v) = %+v", r, l)
	}
	return l
}

// wantLocked checks that err is a *driver.LockedError with the given
// Remaining (any positive value when remaining < 0).
func wantLocked(t *testing.T, err error, remaining time.Duration) {
	t.Helper()
	if !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("err = %v, want ErrLocked", err)
	}
	var le *driver.LockedError
	if !errors.As(err, &le) {
		t.Fatalf("err = %v, want a *driver.LockedError", err)
	}
	if remaining < 0 {
		if le.Remaining <= 0 {
			t.Fatalf("Remaining = %v, want > 0", le.Remaining)
		}
	} else if le.Remaining != remaining {
		t.Fatalf("Remaining = %v, want %v", le.Remaining, remaining)
	}
}

func wantNotHeld(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("err = %v, want ErrNotHeld", err)
	}
}

// owners returns the owners of b's live holds of key, in token order.
func owners(b *memdriver.Backend, key string) []string {
	var os []string
	for _, l := range b.Holders(key) {
		os = append(os, l.Owner)
	}
	return os
}

// woken reports whether s has a pending wake-up, consuming it.
func woken(s driver.Subscription) bool {
	select {
	case <-s.C():
		return true
	default:
		return false
	}
}
