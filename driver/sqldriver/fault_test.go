package sqldriver_test

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/sqldriver"
	"github.com/go-locker/locker/internal/sqltest"
	"github.com/go-locker/locker/internal/testflag"
)

// retry calls f until it returns nil or an error wrapping driver.ErrNotHeld
// or driver.ErrLocked, which are answers, not failures: after a crash or a
// killed connection the first calls may fail while the pool reconnects.
func retry(t *testing.T, what string, f func(ctx context.Context) error) error {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := f(ctx)
		cancel()
		if err == nil || errors.Is(err, driver.ErrNotHeld) || errors.Is(err, driver.ErrLocked) {
			return err
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after 30s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// killConnections kills every client connection to b's database but the
// one that runs the statement: pg_terminate_backend on PostgreSQL, KILL on
// MariaDB. The tests of this package run one at a time (the two backends
// of a test at most at once, on servers of their own), so the victims are
// the test's own pools.
func killConnections(t *testing.T, b backend, admin *sql.DB) int {
	t.Helper()
	ctx := ctxT(t)
	if b.name == "postgres" {
		var n int
		err := admin.QueryRowContext(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE pid <> pg_backend_pid() AND backend_type = 'client backend' AND datname = current_database()`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	conn, err := admin.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rs, err := conn.QueryContext(ctx, `SELECT ID FROM information_schema.PROCESSLIST
		WHERE ID <> CONNECTION_ID() AND DB = DATABASE() AND COMMAND NOT IN ('Daemon', 'Binlog Dump')`)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rs.Next() {
		var id int64
		if err := rs.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rs.Close()
	n := 0
	for _, id := range ids {
		if _, err := conn.ExecContext(ctx, "KILL ?", id); err == nil {
			n++
		}
	}
	return n
}

// TestFault_Restart crashes the database (SIGKILL) and restarts it while
// leases and a Mutex are held: the holds survive (the database is
// durable), other owners stay locked out, and tokens keep increasing.
func TestFault_Restart(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		if b.srv.External() {
			t.Skip("external server: cannot crash it")
		}
		d1, d2 := b.driver(t, nil), b.driver(t, nil)
		ctx := ctxT(t)
		rx := req(uniqueKey(t, "x"), driver.Exclusive, time.Minute)
		lx := mustAcquire(t, d1, rx)
		skey := uniqueKey(t, "s")
		ls1 := mustAcquire(t, d1, req(skey, driver.Shared, time.Minute))
		ls2 := mustAcquire(t, d2, req(skey, driver.Shared, time.Minute))
		m := locker.NewMutex(d1, uniqueKey(t, "m"), locker.WithTTL(10*time.Second), locker.WithErrorHandler(func(error) {}))
		if err := m.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		mtok := m.Token()

		start := time.Now()
		if err := b.srv.Restart(); err != nil {
			t.Fatal(err)
		}
		t.Logf("crash and restart took %v", time.Since(start).Round(time.Millisecond))

		for _, c := range []struct {
			d driver.Driver
			l driver.Lease
		}{{d1, lx}, {d1, ls1}, {d2, ls2}} {
			err := retry(t, "Refresh after restart", func(ctx context.Context) error {
				_, err := c.d.Refresh(ctx, c.l)
				return err
			})
			if err != nil {
				t.Errorf("Refresh(%v %q) after a crash and restart: %v; want the committed hold kept", c.l.Mode, c.l.Key, err)
			}
		}
		err := retry(t, "TryAcquire after restart", func(ctx context.Context) error {
			l, err := d2.TryAcquire(ctx, req(rx.Key, driver.Exclusive, time.Minute))
			if err == nil {
				_ = d2.Release(ctx, l)
			}
			return err
		})
		if !errors.Is(err, driver.ErrLocked) {
			t.Errorf("TryAcquire of a held key after a restart: %v; want ErrLocked", err)
		}
		if err := retry(t, "Release", func(ctx context.Context) error { return d1.Release(ctx, lx) }); err != nil {
			t.Errorf("Release after restart: %v", err)
		}
		l := mustAcquire(t, d2, req(rx.Key, driver.Exclusive, time.Minute))
		if l.Token <= lx.Token {
			t.Errorf("token after restart %d, before %d; want increasing", l.Token, lx.Token)
		}

		checkMutexAfterRestart(t, m, mtok)
	})
}

// checkMutexAfterRestart is TestFault_Restart's check of m, which held
// with token mtok before the restart: it either kept its hold (the restart
// was shorter than its TTL) or reported it lost; either way its next hold
// has a greater token.
func checkMutexAfterRestart(t *testing.T, m *locker.Mutex, mtok locker.Token) {
	t.Helper()
	ctx := ctxT(t)
	select {
	case <-m.Done():
		if !errors.Is(m.Err(), locker.ErrLost) {
			t.Errorf("Mutex ended during the restart with %v; want ErrLost", m.Err())
		}
		t.Logf("Mutex reported its hold lost: %v", m.Err())
		_ = m.UnlockContext(ctx)
	default:
		if err := m.UnlockContext(ctx); err != nil {
			t.Errorf("Unlock after restart: %v", err)
		}
	}
	if err := m.LockContext(ctx); err != nil {
		t.Fatal(err)
	}
	if m.Token() <= mtok {
		t.Errorf("Mutex token after restart %d, before %d; want increasing", m.Token(), mtok)
	}
	if err := m.UnlockContext(ctx); err != nil {
		t.Error(err)
	}
}

// TestFault_KillWhileHolding kills every connection of the holder's pool
// (and of the others) while a Mutex is held: the pool reconnects, the
// watchdog's renewals keep the hold, and others stay locked out. It kills
// three times, a third of the TTL apart; once with -short.
func TestFault_KillWhileHolding(t *testing.T) {
	kills := 3
	if !testflag.Long() {
		kills = 1
	}
	forEachBackendParallel(t, func(t *testing.T, b backend) {
		admin := b.db(t)
		ctx := ctxT(t)
		key := uniqueKey(t, "k")
		// The watchdog renews every TTL/3 and gives the hold up at 0.9
		// TTL without a confirmed renewal: with 3s, a renewal may stall
		// for 1.7s (a loaded machine, a reconnection) before the hold is
		// lost. The kills come a third of the TTL apart, then a whole
		// TTL passes: the hold lives on renewals sent through new
		// connections.
		const ttl = 3 * time.Second
		holder := locker.NewMutex(b.driver(t, nil), key, locker.WithTTL(ttl), locker.WithErrorHandler(func(error) {}))
		other := locker.NewMutex(b.driver(t, nil), key, locker.WithTTL(ttl))
		if err := holder.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		tok := holder.Token()
		for range kills {
			t.Logf("killed %d connections", killConnections(t, b, admin))
			time.Sleep(ttl / 3)
		}
		time.Sleep(ttl)
		select {
		case <-holder.Done():
			t.Fatalf("hold lost after its connections were killed: %v", holder.Err())
		default:
		}
		if ok, err := other.TryLockContext(ctx); ok || err != nil {
			t.Fatalf("TryLock by another owner while held = %v, %v; want false, nil", ok, err)
		}
		if err := holder.UnlockContext(ctx); err != nil {
			t.Fatal(err)
		}
		if err := other.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		if other.Token() <= tok {
			t.Errorf("successor token %d after %d", other.Token(), tok)
		}
		if err := other.UnlockContext(ctx); err != nil {
			t.Error(err)
		}
	})
}

// TestFault_KillWhileWaiting kills every connection, the LISTEN connection
// of PostgreSQL's notifications included, while a Mutex waits for a key
// whose holder has a long lease: once the holder releases, the waiter gets
// the key promptly (PostgreSQL: the driver listens again and the release
// is notified; MariaDB: the waiter polls), not when the lease runs out.
func TestFault_KillWhileWaiting(t *testing.T) {
	forEachBackendParallel(t, func(t *testing.T, b backend) {
		admin := b.db(t)
		d1 := b.driver(t, nil)
		key := uniqueKey(t, "k")
		const holdTTL = 30 * time.Second
		l := mustAcquire(t, d1, req(key, driver.Exclusive, holdTTL))
		// A queued waiter without notifications polls every TTL/3 (3s);
		// on PostgreSQL the test wants the notification, well before.
		waiter := locker.NewMutex(b.driver(t, nil), key, locker.WithTTL(9*time.Second), locker.WithErrorHandler(func(error) {}))
		got := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), holdTTL)
			defer cancel()
			got <- waiter.LockContext(ctx)
		}()
		time.Sleep(300 * time.Millisecond) // the waiter subscribes or polls
		for range 2 {
			t.Logf("killed %d connections", killConnections(t, b, admin))
			time.Sleep(300 * time.Millisecond)
		}
		select {
		case err := <-got:
			t.Fatalf("waiter returned %v while the key was held", err)
		default:
		}
		released := time.Now()
		if err := retry(t, "Release", func(ctx context.Context) error { return d1.Release(ctx, l) }); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
			took := time.Since(released)
			t.Logf("waiter acquired %v after the release", took.Round(time.Millisecond))
			if b.name == "postgres" && took > 2*time.Second {
				t.Errorf("waiter acquired %v after the release; want it notified (the driver listens again after its connection was killed)", took)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("waiter did not acquire within 5s of the release")
		}
		if uint64(waiter.Token()) <= l.Token {
			t.Errorf("waiter token %d after %d", waiter.Token(), l.Token)
		}
		if err := waiter.UnlockContext(ctxT(t)); err != nil {
			t.Error(err)
		}
	})
}

// TestFault_KillIdleThenUse kills the pool's idle connections and uses the
// driver at once (pgx pings only connections idle for more than a second):
// Refresh, Release and TryAcquire succeed on the first call, a dead pooled
// connection being discarded and the call retried on another (by
// database/sql when its driver knows that nothing was sent, by sqldriver
// when PostgreSQL reports that it ended the session).
func TestFault_KillIdleThenUse(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		admin := b.db(t)
		d := b.directDriver(t, nil)
		ctx := ctxT(t)
		key := uniqueKey(t, "k")
		l := mustAcquire(t, d, req(key, driver.Exclusive, time.Minute))
		for _, step := range []struct {
			name string
			f    func() error
		}{
			{"Refresh", func() error { _, err := d.Refresh(ctx, l); return err }},
			{"Release", func() error { return d.Release(ctx, l) }},
			{"TryAcquire", func() error {
				l2, err := d.TryAcquire(ctx, req(key, driver.Exclusive, time.Minute))
				if err == nil {
					err = d.Release(ctx, l2)
				}
				return err
			}},
		} {
			killConnections(t, b, admin)
			if err := step.f(); err != nil {
				t.Errorf("%s right after the pool's connections were killed: %v", step.name, err)
			}
		}
	})
}

// TestFault_CancelDuringCommit cancels an acquire's context while the
// server runs its COMMIT, held up by a deferred trigger until the test lets
// it go: the acquire fails, yet its COMMIT then applies on the server. The
// Release with token 0 by which the front-end cleans up after a failed
// acquire, sent while that COMMIT is held up, must remove the grant, not
// run before the COMMIT and find nothing (which left a hold that no one
// would release, seen as a rare failure of lockertest's ContextCanceled
// race on PostgreSQL). PostgreSQL only: there a plain DELETE neither sees
// nor waits for a row inserted by a transaction that has not committed;
// MySQL's DELETE, a locking read, waits for it.
func TestFault_CancelDuringCommit(t *testing.T) {
	if pgServer == nil {
		sqltest.SkipOrFail(t, pgServerErr)
	}
	pg := backend{name: "postgres", srv: pgServer}
	admin := pg.db(t)
	opts := &sqldriver.Options{Table: "locker_slow_commit"}
	if err := sqldriver.CreateTable(ctxT(t), admin, opts); err != nil {
		t.Fatal(err)
	}
	const gate = 4242_0001 // the advisory lock that holds the COMMIT up
	installSlowCommit(t, admin, gate)
	for _, c := range []struct {
		name string
		b    backend
	}{{"pgx", pg}, {"database-sql", plainPostgres(t)}} {
		t.Run(c.name, func(t *testing.T) {
			gateConn, err := admin.Conn(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			defer gateConn.Close()
			if _, err := gateConn.ExecContext(ctxT(t), "SELECT pg_advisory_lock($1)", gate); err != nil {
				t.Fatal(err)
			}
			d := c.b.driver(t, opts)
			r := driver.Request{Key: uniqueKey(t, "k"), Owner: "slow-" + owner(), Mode: driver.Exclusive, TTL: time.Minute}
			actx, cancel := context.WithCancel(context.Background())
			defer cancel()
			acquired := make(chan error, 1)
			go func() {
				_, err := d.TryAcquire(actx, r)
				acquired <- err
			}()
			waitActivity(t, admin, "the acquire's COMMIT held up by the trigger",
				`upper(query) = 'COMMIT' AND wait_event = 'advisory'`)
			cancel()
			if err := <-acquired; err == nil {
				t.Fatal("TryAcquire succeeded although its context was cancelled during its COMMIT")
			}
			// The front-end's cleanup: a fresh context, token 0. It runs
			// at once (before the fix, finding nothing) or waits for the
			// acquire's transaction; let the COMMIT go once it is either.
			released := make(chan error, 1)
			go func() {
				released <- d.Release(ctxT(t), driver.Lease{Key: r.Key, Owner: r.Owner, Mode: r.Mode, Abandoned: true})
			}()
			rerr, returned := awaitCleanup(t, admin, released)
			if _, err := gateConn.ExecContext(ctxT(t), "SELECT pg_advisory_unlock($1)", gate); err != nil {
				t.Fatal(err)
			}
			if !returned {
				rerr = <-released
			}
			if rerr != nil && !errors.Is(rerr, driver.ErrNotHeld) {
				t.Fatalf("cleanup Release: %v", rerr)
			}
			t.Logf("cleanup Release: %v", rerr)
			// The acquire waits for the held-up transaction (the key's
			// advisory lock), then must find the key free.
			l := mustAcquire(t, c.b.driver(t, opts), req(r.Key, driver.Exclusive, time.Minute))
			if err := d.Release(ctxT(t), l); err != nil {
				t.Error(err)
			}
		})
	}
}

// installSlowCommit installs, on admin's database, the trigger of
// TestFault_CancelDuringCommit: the COMMIT of a row of an owner named
// "slow-…" in locker_slow_commit waits for the advisory lock gate.
func installSlowCommit(t *testing.T, admin *sql.DB, gate int) {
	t.Helper()
	for _, q := range []string{
		// The trigger waits for the gate, again after a cancel request
		// (pgx sends one when it abandons a connection): a COMMIT that
		// has written its commit record cannot be cancelled either.
		`CREATE OR REPLACE FUNCTION locker_slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN
				LOOP
					BEGIN
						PERFORM pg_advisory_xact_lock_shared(` + strconv.Itoa(gate) + `);
						RETURN NULL;
					EXCEPTION WHEN query_canceled THEN NULL;
					END;
				END LOOP;
			END $$`,
		`DROP TRIGGER IF EXISTS slow_commit ON locker_slow_commit`,
		// Only the rows of owners named "slow-…" hold the COMMIT up.
		`CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON locker_slow_commit
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.owner LIKE 'slow-%')
			EXECUTE FUNCTION locker_slow_commit()`,
	} {
		if _, err := admin.ExecContext(ctxT(t), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// awaitCleanup waits until the cleanup Release returns on released or
// waits for the key's lock, for at most 20s; it returns the Release's
// error, if it returned.
func awaitCleanup(t *testing.T, admin *sql.DB, released <-chan error) (rerr error, returned bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; {
		select {
		case rerr = <-released:
			return rerr, true
		default:
		}
		if activity(t, admin, `query LIKE 'SELECT pg_advisory_xact_lock(%' AND wait_event = 'advisory'`) {
			return nil, false
		}
		if time.Now().After(deadline) {
			t.Fatal("cleanup Release neither returned nor waited for the key's lock within 20s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitActivity waits until activity reports cond.
func waitActivity(t *testing.T, admin *sql.DB, what, cond string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !activity(t, admin, cond); {
		if time.Now().After(deadline) {
			t.Fatalf("no sign of %s after 20s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// activity reports whether pg_stat_activity shows another backend running
// a statement for which cond holds.
func activity(t *testing.T, admin *sql.DB, cond string) bool {
	t.Helper()
	var n int
	err := admin.QueryRowContext(ctxT(t), `SELECT count(*) FROM pg_stat_activity
		WHERE pid <> pg_backend_pid() AND state = 'active' AND `+cond).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n > 0
}
