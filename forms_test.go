//go:build go1.25

package locker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/memdriver"
)

// TestRWMutexTryAcquire: both sides of an RWMutex have the hold form of a
// try, which reports a taken key as ErrLocked.
func TestRWMutexTryAcquire(t *testing.T) {
	ctx := context.Background()
	c := locker.New(memdriver.New())
	defer c.Close(ctx)
	a, b := c.RWMutex("k"), c.RWMutex("k")

	w, err := a.TryAcquire(ctx)
	if err != nil || w.Shared() {
		t.Fatalf("TryAcquire of a free key = %v, %v", w, err)
	}
	for name, try := range map[string]func(context.Context) (*locker.Hold, error){"TryAcquire": b.TryAcquire, "TryRAcquire": b.TryRAcquire} {
		if h, err := try(ctx); h != nil || !errors.Is(err, locker.ErrLocked) {
			t.Errorf("%s while another handle writes = %v, %v; want ErrLocked", name, h, err)
		}
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r1, err := a.TryRAcquire(ctx)
	if err != nil || !r1.Shared() {
		t.Fatalf("TryRAcquire of a free key = %v, %v", r1, err)
	}
	r2, err := b.TryRAcquire(ctx)
	if err != nil {
		t.Fatalf("TryRAcquire beside another reader: %v", err)
	}
	if h, err := b.TryAcquire(ctx); h != nil || !errors.Is(err, locker.ErrLocked) {
		t.Errorf("TryAcquire while two read = %v, %v; want ErrLocked", h, err)
	}
	if ok, err := b.TryLockContext(ctx); ok || err != nil {
		t.Errorf("TryLockContext while two read = %v, %v; want false and no error", ok, err)
	}
	r1.Release(ctx)
	r2.Release(ctx)
}

// TestMultiLockForms: a MultiLock takes options and has the sync and
// context forms of a try.
func TestMultiLockForms(t *testing.T) {
	ctx := context.Background()
	c := locker.New(memdriver.New(), locker.WithErrorHandler(func(err error) { t.Errorf("reported: %v", err) }))
	defer c.Close(ctx)

	if _, err := c.MultiLock([]string{"a"}, locker.WithTTL(-1)).Acquire(ctx); !errors.Is(err, locker.ErrInvalidTTL) {
		t.Errorf("Acquire of a MultiLock with a negative TTL: %v; want ErrInvalidTTL", err)
	}

	ab, bc := c.MultiLock([]string{"b", "a"}), c.MultiLock([]string{"c", "b"})
	if !ab.TryLock() {
		t.Fatal("TryLock of free keys = false")
	}
	if ab.TryLock() {
		t.Error("a second TryLock of a locked MultiLock = true")
	}
	if ok, err := bc.TryLockContext(ctx); ok || err != nil {
		t.Errorf("TryLockContext with key b taken = %v, %v; want false and no error", ok, err)
	}
	if bc.TryLock() {
		t.Error("TryLock with key b taken = true")
	}
	if h, err := c.Mutex("c").TryAcquire(ctx); err != nil {
		t.Errorf("key c is still held after failed tries: %v", err)
	} else {
		h.Release(ctx)
	}
	ab.Unlock()
	ok, err := bc.TryLockContext(ctx)
	if !ok || err != nil {
		t.Fatalf("TryLockContext of free keys = %v, %v", ok, err)
	}
	if err := bc.UnlockContext(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestTryLockPanicsOnlyOnMisuse: the sync try forms panic on what only a
// change of the code cures, as Lock does.
func TestTryLockPanicsOnlyOnMisuse(t *testing.T) {
	c := locker.New(memdriver.New())
	defer c.Close(context.Background())
	mustPanic(t, func() { c.Mutex("").TryLock() })
	mustPanic(t, func() { c.RWMutex("k", locker.WithTTL(0)).TryRLock() })
	mustPanic(t, func() { c.MultiLock(nil).TryLock() })
}

// TestMinTTL: a TTL the watchdog cannot keep is refused, before any I/O,
// with an error naming the limit, on a driver whose own minimum is lower
// (memdriver: 1ms), with or without renewals; MinTTL itself is kept.
func TestMinTTL(t *testing.T) {
	ctx := context.Background()
	b := memdriver.NewBackend()
	for _, opts := range [][]locker.Option{nil, {locker.WithFixedLease()}} {
		for _, ttl := range []time.Duration{time.Microsecond, 2 * time.Millisecond, 20 * time.Millisecond, locker.MinTTL - time.Nanosecond} {
			m := locker.NewMutex(b.Driver(), "k", append(opts, locker.WithTTL(ttl))...)
			err := m.LockContext(ctx)
			if !errors.Is(err, locker.ErrInvalidTTL) || !strings.Contains(err.Error(), "locker.MinTTL, 80ms") {
				t.Errorf("LockContext with TTL %v: %v; want ErrInvalidTTL naming locker.MinTTL, 80ms", ttl, err)
			}
			if ok, err := m.TryLockContext(ctx); ok || !errors.Is(err, locker.ErrInvalidTTL) {
				t.Errorf("TryLockContext with TTL %v: %v, %v; want ErrInvalidTTL", ttl, ok, err)
			}
		}
	}
	if n := b.Calls(); n != 0 {
		t.Errorf("lock calls with a TTL below MinTTL made %d driver calls", n)
	}
	synctest.Test(t, func(t *testing.T) {
		h, err := locker.NewMutex(memdriver.New(), "k", locker.WithTTL(locker.MinTTL)).Acquire(ctx)
		if err != nil {
			t.Fatalf("Acquire with TTL MinTTL: %v", err)
		}
		time.Sleep(time.Second)
		if err := h.Err(); err != nil {
			t.Fatalf("a hold with TTL MinTTL after a second of renewals: %v", err)
		}
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
