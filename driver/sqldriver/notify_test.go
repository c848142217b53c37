package sqldriver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/sqldriver"
	"github.com/go-locker/locker/internal/sqltest"
)

// TestNotifyLingerAndClose checks the life of the LISTEN connection: a
// subscription that follows the last one within the linger reuses it, one
// after Close starts a new one, and both hear releases.
func TestNotifyLingerAndClose(t *testing.T) {
	if pgServer == nil {
		sqltest.SkipOrFail(t, pgServerErr)
	}
	b := backend{name: "postgres", srv: pgServer}
	nd, ok := b.driver(t, nil).(*sqldriver.Driver)
	if !ok || !nd.Capabilities().Notify {
		t.Fatal("New did not return a *Driver that notifies on PostgreSQL through pgx")
	}
	other := b.driver(t, nil)
	key := uniqueKey(t, "k")
	heard := func(why string) {
		t.Helper()
		sub, err := nd.Subscribe(ctxT(t), key)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		l := mustAcquire(t, other, req(key, driver.Exclusive, time.Minute))
		if err := other.Release(ctxT(t), l); err != nil {
			t.Fatal(err)
		}
		select {
		case <-sub.C():
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no notification within 5s of a release", why)
		}
	}
	heard("first subscription")
	heard("subscription within the linger")
	if err := nd.Close(); err != nil {
		t.Fatal(err)
	}
	heard("subscription after Close")
	if err := nd.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestNoSubscribeWithoutNotify: on a Driver that does not notify (MySQL,
// or Options.NoNotify), package locker polls and never subscribes, so a
// contended wait reports no error. New returns a *Driver either way.
func TestNoSubscribeWithoutNotify(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, opts := range []*sqldriver.Options{nil, {NoNotify: true}} {
			d := b.driver(t, opts).(*sqldriver.Driver)
			if d.Capabilities().Notify {
				continue
			}
			// Two Clients: a waiter of the holder's own Client would wait
			// in its line, not on the backend.
			report := locker.WithErrorHandler(func(err error) { t.Errorf("reported while waiting: %v", err) })
			holder, waiter := locker.New(d, report), locker.New(d, report)
			key := uniqueKey(t, "k")
			h, err := holder.Mutex(key).Acquire(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(ctxT(t), 300*time.Millisecond)
			if err := waiter.Mutex(key).LockContext(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("LockContext of a held key: %v; want the deadline", err)
			}
			cancel()
			if err := h.Release(ctxT(t)); err != nil {
				t.Error(err)
			}
			for _, c := range []*locker.Client{holder, waiter} {
				if err := c.Close(ctxT(t)); err != nil {
					t.Error(err)
				}
			}
		}
	})
}
