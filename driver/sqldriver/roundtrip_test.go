package sqldriver_test

import (
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/sqldriver"
)

// TestRoundTrips checks the round trips the package documentation
// promises, counted on the client's sockets: an acquire takes two on
// PostgreSQL through pgx and five on MySQL (a refused one two and four),
// Refresh one, and Release one on PostgreSQL and two on MySQL (the second
// deletes the lock's anchor row).
func TestRoundTrips(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		acquire, refused, release := 2, 2, 1 // pipelined: the second round trip is the COMMIT alone
		if b.name == "mariadb" {
			acquire, refused, release = 5, 4, 2 // BEGIN, lock, read, COMMIT; the hold, the anchor
		}
		rt := &roundTrips{}
		d, err := sqldriver.New(countedDB(t, b.srv, rt), nil)
		if err != nil {
			t.Fatal(err)
		}
		closeAtCleanup(t, d)
		ctx := ctxT(t)
		key := uniqueKey(t, "k")
		// The first acquire of the connection (prepares statements) costs
		// more.
		warm := mustAcquire(t, d, req(key, driver.Exclusive, time.Minute))
		if _, err := d.Refresh(ctx, warm); err != nil {
			t.Fatal(err)
		}
		if err := d.Release(ctx, warm); err != nil {
			t.Fatal(err)
		}
		if _, err := d.TryAcquire(ctx, req(key, driver.Exclusive, time.Minute)); err != nil {
			t.Fatal(err) // left held: the refused attempt below needs a holder
		}
		count := func(what string, want int, f func() error) {
			t.Helper()
			rt.n.Store(0)
			if err := f(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if got := int(rt.n.Load()); got != want {
				t.Errorf("%s took %d round trips; want %d", what, got, want)
			}
		}
		other := req(key, driver.Exclusive, time.Minute)
		count("refused TryAcquire", refused, func() error {
			_, err := d.TryAcquire(ctx, other)
			if err == nil {
				t.Error("TryAcquire of a held key succeeded")
			}
			return nil
		})
		k2 := uniqueKey(t, "k2")
		l := mustAcquire(t, d, req(k2, driver.Exclusive, time.Minute))
		if err := d.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
		r := req(k2, driver.Exclusive, time.Minute)
		count("TryAcquire", acquire, func() error { l, err = d.TryAcquire(ctx, r); return err })
		count("Refresh", 1, func() error { _, err := d.Refresh(ctx, l); return err })
		count("Release", release, func() error { return d.Release(ctx, l) })
	})
}
