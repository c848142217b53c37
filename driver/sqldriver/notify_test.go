package sqldriver_test

import (
	"testing"
	"time"

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
	nd, ok := b.driver(t, nil).(*sqldriver.NotifyDriver)
	if !ok {
		t.Fatal("New did not return a *NotifyDriver on PostgreSQL through pgx")
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
