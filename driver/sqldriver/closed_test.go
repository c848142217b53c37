package sqldriver_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/sqldriver"
	"github.com/go-locker/locker/internal/drivertest"
)

// calls returns every call of d on key, with l a lease of d on key.
func calls(d driver.Driver, key string, l driver.Lease) []drivertest.Call {
	cs := []drivertest.Call{
		{Name: "TryAcquire", F: func(ctx context.Context) error {
			_, err := d.TryAcquire(ctx, req(key, driver.Exclusive, time.Minute))
			return err
		}},
		{Name: "TryAcquireQueued", F: func(ctx context.Context) error {
			_, err := tryQueued(d, ctx, req(key, driver.Shared, time.Minute))
			return err
		}},
		{Name: "Refresh", F: func(ctx context.Context) error {
			_, err := d.Refresh(ctx, l)
			return err
		}},
		{Name: "RefreshBatch", F: func(ctx context.Context) error {
			return errors.Join(d.(driver.BatchRefresher).RefreshBatch(ctx, []driver.Lease{l, l})...)
		}},
		{Name: "Release", F: func(ctx context.Context) error { return d.Release(ctx, l) }},
		{Name: "Release abandoned", F: func(ctx context.Context) error {
			l0 := l
			l0.Token, l0.Abandoned = 0, true
			return d.Release(ctx, l0)
		}},
	}
	if n, ok := d.(*sqldriver.Driver); ok && n.Capabilities().Notify {
		cs = append(cs, drivertest.Call{Name: "Subscribe", F: func(ctx context.Context) error {
			s, err := n.Subscribe(ctx, key)
			if err == nil {
				_ = s.Close()
			}
			return err
		}})
	}
	return cs
}

// TestClosedClient closes the *sql.DB under a driver (closeClient): every
// call must then fail at once with a permanent error wrapping
// driver.ErrClosed. On PostgreSQL the LISTEN connection, which closing
// the pool does not end, goes within a second, and a waiter subscribed
// before is woken.
func TestClosedClient(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		if b.srv.External() {
			t.Skip("external server: the test counts its connections")
		}
		d := b.driver(t, nil)
		admin := b.db(t)
		key := uniqueKey(t, "k")
		l := mustAcquire(t, d, req(key, driver.Exclusive, time.Minute))
		var woken <-chan struct{}
		if n, ok := d.(*sqldriver.Driver); ok && n.Capabilities().Notify {
			s, err := n.Subscribe(ctxT(t), key)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			woken = s.C()
			select {
			case <-woken: // the wake-up of every subscriber when the driver starts listening
			default:
			}
			if got := listeners(t, admin); got < 1 {
				t.Fatalf("%d LISTEN connections after Subscribe; want 1", got)
			}
		}
		closeClient(t, d)
		closed := time.Now()
		drivertest.CheckClosed(ctxT(t), t, "after Close of the *sql.DB", calls(d, key, l), driver.ErrClosed)
		if woken == nil {
			return
		}
		select {
		case <-woken:
			t.Logf("subscriber woken %v after the Close", time.Since(closed).Round(time.Millisecond))
		case <-time.After(2 * time.Second):
			t.Error("subscriber not woken within 2s of the Close of the *sql.DB")
		}
		for deadline := time.Now().Add(2 * time.Second); listeners(t, admin) > 0; {
			if time.Now().After(deadline) {
				t.Fatal("LISTEN connection still open 2s after the Close of the *sql.DB")
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("LISTEN connection gone %v after the Close", time.Since(closed).Round(time.Millisecond))
	})
}

// listeners returns the connections to PostgreSQL whose last statement
// was a LISTEN.
func listeners(t *testing.T, admin *sql.DB) int {
	t.Helper()
	var n int
	if err := admin.QueryRowContext(ctxT(t), `SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestStalledServer makes the server stop answering a driver (stall: a
// black hole in front of its connections): every call with a 600ms
// deadline must return within 650ms with an error that wraps the
// context's, and the driver must work again once the server answers. The
// calls run concurrently, as a busy process makes them: one waits on the
// stalled pooled connection, the others on connections that never open.
func TestStalledServer(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		d := b.driver(t, nil)
		key := uniqueKey(t, "k")
		l := mustAcquire(t, d, req(key, driver.Exclusive, time.Minute))
		resume := stall(t, d)
		drivertest.CheckStalled(t, calls(d, key, l))
		resume()
		err := retry(t, "Release after the stall", func(ctx context.Context) error { return d.Release(ctx, l) })
		if err != nil && !errors.Is(err, driver.ErrNotHeld) {
			t.Fatal(err)
		}
		l2 := mustAcquire(t, d, req(fmt.Sprint(key, "/after"), driver.Exclusive, time.Minute))
		if err := d.Release(ctxT(t), l2); err != nil {
			t.Error(err)
		}
	})
}
