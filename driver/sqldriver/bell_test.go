package sqldriver_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/sqldriver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/sqltest"
)

// mariadb returns the MariaDB backend, or skips (fails with
// LOCKER_REQUIRE_SERVERS=1) without it.
func mariadb(t *testing.T) backend {
	t.Helper()
	if myServer == nil {
		sqltest.SkipOrFail(t, myServerErr)
	}
	return backend{name: "mariadb", srv: myServer}
}

// countedDriver returns a driver on a pool of its own whose round trips rt
// counts.
func countedDriver(t *testing.T, rt *roundTrips) (*sqldriver.Driver, *sql.DB) {
	t.Helper()
	db := countedDB(t, myServer, rt)
	d, err := sqldriver.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	closeAtCleanup(t, d)
	return d, db
}

// bellOf returns the connection id of the session that holds the bell of
// owner for key, or 0.
func bellOf(t *testing.T, admin *sql.DB, d *sqldriver.Driver, key, owner string) int64 {
	t.Helper()
	name, err := sqldriver.BellName(ctxT(t), d, key, owner)
	if err != nil {
		t.Fatal(err)
	}
	var id sql.NullInt64
	if err := admin.QueryRowContext(ctxT(t), "SELECT IS_USED_LOCK(?)", name).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id.Int64
}

// queued reports whether owner has an entry in key's wait queue.
func queued(t *testing.T, admin *sql.DB, key, owner string) bool {
	t.Helper()
	var n int
	err := admin.QueryRowContext(ctxT(t), "SELECT COUNT(*) FROM locker_leases WHERE name = ? AND owner = ? AND mode IN (3, 4)", key, owner).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// eventually waits up to 5s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within 5s: %s", what)
		}
	}
}

// waitingInGetLock reports how many sessions wait in GET_LOCK for the bell
// of owner for key.
func waitingInGetLock(t *testing.T, admin *sql.DB, d *sqldriver.Driver, key, owner string) int {
	t.Helper()
	name, err := sqldriver.BellName(ctxT(t), d, key, owner)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	err = admin.QueryRowContext(ctxT(t), "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE ?",
		"SELECT GET_LOCK('"+name+"'%").Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkPoolClean checks that no idle connection of db holds a user lock
// or an open transaction: what the driver returns to the pool carries no
// session state.
func checkPoolClean(t *testing.T, db *sql.DB) {
	t.Helper()
	ctx := ctxT(t)
	idle := db.Stats().Idle
	conns := make([]*sql.Conn, 0, idle)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range idle {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		var locks, inTx int
		if err := c.QueryRowContext(ctx, "SELECT RELEASE_ALL_LOCKS(), @@in_transaction").Scan(&locks, &inTx); err != nil {
			t.Fatal(err)
		}
		if locks != 0 || inTx != 0 {
			t.Errorf("a pooled connection held %d user locks, in_transaction = %d; want none", locks, inTx)
		}
	}
}

func granted(t *testing.T, c <-chan drivertest.Acquired) driver.Lease {
	t.Helper()
	select {
	case g := <-c:
		if g.Err != nil {
			t.Fatal(g.Err)
		}
		return g.Lease
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire not granted within 5s")
	}
	return driver.Lease{}
}

// TestBellWakesWithoutPolling: a waiter behind a holder that has the bell
// sends nothing while it waits, and the holder's release wakes it.
func TestBellWakesWithoutPolling(t *testing.T) {
	b := mariadb(t)
	admin := b.db(t)
	ctx := ctxT(t)
	key := uniqueKey(t, "k")
	var rt1, rt2 roundTrips
	d0 := b.driver(t, nil).(*sqldriver.Driver)
	d1, db1 := countedDriver(t, &rt1)
	d2, db2 := countedDriver(t, &rt2)

	// A holder granted without Acquire has no bell: the first waiter
	// polls; the second waits for the first's bell.
	l0 := mustAcquire(t, d0, req(key, driver.Exclusive, 30*time.Second))
	r1, r2 := req(key, driver.Exclusive, 30*time.Second), req(key, driver.Exclusive, 30*time.Second)
	c1 := drivertest.AcquireAsync(ctx, d1, r1)
	eventually(t, "the first waiter takes its bell and joins the queue", func() bool {
		return bellOf(t, admin, d0, key, r1.Owner) != 0 && queued(t, admin, key, r1.Owner)
	})
	c2 := drivertest.AcquireAsync(ctx, d2, r2)
	eventually(t, "the second waiter waits in GET_LOCK for the first's bell", func() bool {
		return waitingInGetLock(t, admin, d0, key, r1.Owner) == 1
	})
	if err := d0.Release(ctx, l0); err != nil {
		t.Fatal(err)
	}
	l1 := granted(t, c1)
	bell := bellOf(t, admin, d0, key, r1.Owner)
	if bell == 0 {
		t.Fatal("the holder granted by Acquire does not keep its bell")
	}

	// The second waiter sends nothing while it waits.
	rt2.n.Store(0)
	time.Sleep(time.Second)
	if n := rt2.n.Load(); n != 0 {
		t.Fatalf("the waiter made %d round trips in 1s of waiting; want 0 (woken, not polling)", n)
	}
	drivertest.WantWaiting(t, c2, "(the second) while the key was held")
	if err := d1.Release(ctx, l1); err != nil {
		t.Fatal(err)
	}
	l2 := granted(t, c2)
	// The GET_LOCK's answer, then BEGIN, the anchor, the read, the
	// grant and COMMIT.
	if n := rt2.n.Load(); n > 5 {
		t.Errorf("woken waiter made %d round trips to be granted; want at most 5", n)
	}
	if l2.Token <= l1.Token || l1.Token <= l0.Token {
		t.Errorf("tokens %d, %d, %d; want increasing", l0.Token, l1.Token, l2.Token)
	}
	if id := bellOf(t, admin, d0, key, r1.Owner); id != 0 {
		t.Errorf("the first holder's bell held by session %d after its release; want free", id)
	}
	if id := bellOf(t, admin, d0, key, r2.Owner); id == 0 || id == bell {
		t.Errorf("the new holder's bell held by session %d (the first holder's was %d); want its own", id, bell)
	}
	if err := d2.Release(ctx, l2); err != nil {
		t.Fatal(err)
	}
	if id := bellOf(t, admin, d0, key, r2.Owner); id != 0 {
		t.Errorf("bell held by session %d after the last release; want free", id)
	}
	checkPoolClean(t, db1)
	checkPoolClean(t, db2)
}

// TestBellCancel: waiters whose context ends, one polling with the bell
// and one waiting in GET_LOCK, return by their deadline and leave no bell,
// no queue entry and no session state behind.
func TestBellCancel(t *testing.T) {
	b := mariadb(t)
	admin := b.db(t)
	key := uniqueKey(t, "k")
	var rt1, rt2 roundTrips
	d0 := b.driver(t, nil).(*sqldriver.Driver)
	d1, db1 := countedDriver(t, &rt1)
	d2, db2 := countedDriver(t, &rt2)
	l0 := mustAcquire(t, d0, req(key, driver.Exclusive, 30*time.Second))

	const wait = 800 * time.Millisecond
	start := time.Now()
	ctx1, cancel1 := context.WithTimeout(context.Background(), wait)
	defer cancel1()
	r1, r2 := req(key, driver.Exclusive, 30*time.Second), req(key, driver.Exclusive, 30*time.Second)
	c1 := drivertest.AcquireAsync(ctx1, d1, r1)
	eventually(t, "the first waiter takes its bell and joins the queue", func() bool {
		return bellOf(t, admin, d0, key, r1.Owner) != 0 && queued(t, admin, key, r1.Owner)
	})
	ctx2, cancel2 := context.WithTimeout(context.Background(), wait)
	defer cancel2()
	c2 := drivertest.AcquireAsync(ctx2, d2, r2)
	for i, c := range []<-chan drivertest.Acquired{c1, c2} {
		select {
		case g := <-c:
			if !errors.Is(g.Err, context.DeadlineExceeded) {
				t.Errorf("waiter %d: Acquire = %+v, %v; want an error wrapping context.DeadlineExceeded", i+1, g.Lease, g.Err)
			}
		case <-time.After(wait + 2*time.Second):
			t.Fatalf("waiter %d had not returned 2s after its deadline", i+1)
		}
	}
	t.Logf("both returned %v after the first began", time.Since(start).Round(time.Millisecond))
	eventually(t, "the bells are free once the waiters gave up", func() bool {
		return bellOf(t, admin, d0, key, r1.Owner) == 0 && bellOf(t, admin, d0, key, r2.Owner) == 0
	})
	if err := d0.Release(ctxT(t), l0); err != nil {
		t.Fatal(err)
	}
	// Their queue entries are gone: a newcomer is granted.
	eventually(t, "a newcomer is granted the key", func() bool {
		l, err := d0.TryAcquire(ctxT(t), req(key, driver.Exclusive, time.Second))
		if err == nil {
			_ = d0.Release(ctxT(t), l)
		}
		return err == nil
	})
	checkPoolClean(t, db1)
	checkPoolClean(t, db2)
}

// TestBellKilledHolder: a holder that keeps the bell dies (its connections
// drop without a release): the waiter is granted once the hold's lease
// runs out, not before.
func TestBellKilledHolder(t *testing.T) {
	b := mariadb(t)
	admin := b.db(t)
	ctx := ctxT(t)
	key := uniqueKey(t, "k")
	d0 := b.directDriver(t, nil).(*sqldriver.Driver)
	d1 := b.driver(t, nil).(*sqldriver.Driver) // behind a fault proxy
	d2 := b.directDriver(t, nil).(*sqldriver.Driver)

	// d1 is granted by Acquire behind d0, and keeps the bell.
	l0 := mustAcquire(t, d0, req(key, driver.Exclusive, 30*time.Second))
	const ttl = 2 * time.Second
	r1 := req(key, driver.Exclusive, ttl)
	c1 := drivertest.AcquireAsync(ctx, d1, r1)
	eventually(t, "the first waiter takes its bell and joins the queue", func() bool {
		return bellOf(t, admin, d0, key, r1.Owner) != 0 && queued(t, admin, key, r1.Owner)
	})
	if err := d0.Release(ctx, l0); err != nil {
		t.Fatal(err)
	}
	l1 := granted(t, c1)
	// The lease runs from the server's grant, after l1.Start.
	grantedAt := l1.Start
	if grantedAt.IsZero() {
		t.Fatal("Acquire returned a lease without Start")
	}
	c2 := drivertest.AcquireAsync(ctx, d2, req(key, driver.Exclusive, 30*time.Second))
	eventually(t, "the second waiter waits in GET_LOCK for the holder's bell", func() bool {
		return waitingInGetLock(t, admin, d0, key, r1.Owner) == 1
	})

	// d1's process dies: its sockets close, nothing is released.
	p := clientOf(t, d1).Proxy
	p.Blackhole(true)
	p.Reset()
	select {
	case g := <-c2:
		if g.Err != nil {
			t.Fatal(g.Err)
		}
		if since := time.Since(grantedAt); since < ttl {
			t.Errorf("waiter granted %v after the dead holder's grant, before its TTL of %v", since, ttl)
		}
		if g.Lease.Token <= l1.Token {
			t.Errorf("token %d after the dead holder's %d", g.Lease.Token, l1.Token)
		}
		t.Logf("waiter granted %v after the dead holder's grant (TTL %v)", time.Since(grantedAt).Round(time.Millisecond), ttl)
		if err := d2.Release(ctx, g.Lease); err != nil {
			t.Error(err)
		}
	case <-time.After(ttl + 5*time.Second):
		t.Fatalf("waiter not granted within %v of the holder's death", ttl+5*time.Second)
	}
}

// TestBellNoSessionState: after contended Mutexes of several clients (as
// processes) have come and gone, their pools hold no user lock, no open
// transaction.
func TestBellNoSessionState(t *testing.T) {
	mariadb(t)
	ctx := ctxT(t)
	key := uniqueKey(t, "k")
	const clients, rounds = 4, 5
	dbs := make([]*sql.DB, clients)
	ms := make([]*locker.Mutex, clients)
	for i := range ms {
		var rt roundTrips
		var d *sqldriver.Driver
		d, dbs[i] = countedDriver(t, &rt)
		c := locker.New(d, locker.WithTTL(10*time.Second))
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		ms[i] = c.Mutex(key)
	}
	errs := make(chan error, clients)
	for _, m := range ms {
		go func() {
			for range rounds {
				h, err := m.Acquire(ctx)
				if err != nil {
					errs <- err
					return
				}
				time.Sleep(5 * time.Millisecond)
				if err := h.Release(ctx); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, db := range dbs {
		checkPoolClean(t, db)
	}
}
