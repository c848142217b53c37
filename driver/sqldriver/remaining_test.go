package sqldriver_test

import (
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/sqldriver"
)

// TestRemainingAfterRenewalDuringRead checks that a refusal's
// LockedError.Remaining is at most the holder's TTL when the read that
// refuses sees a renewal whose clock reading is later than the read
// statement's own: the renewal's expiry is then more than the TTL after
// the statement's clock, and Remaining must be measured when the row was
// read, not when the statement started. The test makes that certain on
// each dialect:
//
//   - PostgreSQL, with pgx's simple protocol (default_query_exec_mode),
//     sends the acquire's BEGIN, advisory lock and read as one message,
//     whose receipt is statement_timestamp() for all three. The test's
//     transaction holds the key's advisory lock, as the holder's own
//     re-acquire does, so the acquire waits with its clock read; 50 ms
//     later the transaction renews the hold (statement_timestamp() + TTL)
//     and commits, and the read sees the renewal.
//   - On MariaDB a statement's clock (UTC_TIMESTAMP) is read when it
//     starts and its snapshot a moment later, after the parse, with
//     nothing in between that a test can make wait. The test moves the
//     acquiring session's statement clock 50 ms back instead (SET
//     timestamp, which SYSDATE ignores), then the holder renews.
func TestRemainingAfterRenewalDuringRead(t *testing.T) {
	const ttl = 10 * time.Second
	forEachBackend(t, func(t *testing.T, b backend) {
		const table = "locker_remaining_test"
		opts := tableOf(t, b, table)
		ctx := ctxT(t)
		key := uniqueKey(t, "k")
		holder := b.driver(t, opts)
		l := mustAcquire(t, holder, req(key, driver.Exclusive, ttl))
		var err error
		var d driver.Driver
		if b.name == "postgres" {
			dsn := b.srv.DSN
			if strings.Contains(dsn, "?") {
				dsn += "&"
			} else {
				dsn += "?"
			}
			if d, err = sqldriver.New(b.dbOn(t, dsn+"default_query_exec_mode=simple_protocol"), opts); err != nil {
				t.Fatal(err)
			}
			closeAtCleanup(t, d)
			err = refuseDuringRenewalPostgres(t, b, d, table, l)
		} else {
			db := b.db(t)
			db.SetMaxOpenConns(1) // the session whose clock is moved back
			if d, err = sqldriver.New(db, opts); err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, "SET timestamp = UNIX_TIMESTAMP(SYSDATE(6)) - 0.05"); err != nil {
				t.Fatal(err)
			}
			if _, err := holder.Refresh(ctx, l); err != nil {
				t.Fatal(err)
			}
			_, err = d.TryAcquire(ctx, req(key, driver.Exclusive, ttl))
		}
		var le *driver.LockedError
		if !errors.As(err, &le) {
			t.Fatalf("TryAcquire of a held key: %v; want a LockedError", err)
		}
		t.Logf("Remaining %v (TTL %v)", le.Remaining, ttl)
		if le.Remaining <= 0 || le.Remaining > ttl {
			t.Errorf("LockedError.Remaining = %v; want between 0 and the holder's TTL %v", le.Remaining, ttl)
		}
		if b.name != "postgres" {
			// Inspect on the same session reads the hold the same way.
			st, err := d.(driver.Inspector).Inspect(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Holders) != 1 || st.Holders[0].Remaining <= 0 || st.Holders[0].Remaining > ttl {
				t.Errorf("Inspect: holders %+v; want one with between 0 and %v remaining", st.Holders, ttl)
			}
		}
	})
}

// refuseDuringRenewalPostgres runs d's TryAcquire of l.Key while the
// test's transaction holds the key's advisory lock, renews l 50 ms after
// the acquire began to wait for that lock, and commits; it returns the
// acquire's error.
func refuseDuringRenewalPostgres(t *testing.T, b backend, d driver.Driver, table string, l driver.Lease) error {
	t.Helper()
	ctx := ctxT(t)
	admin := b.db(t)
	tx, err := admin.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", sqldriver.LockID(l.Key)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := d.TryAcquire(ctx, req(l.Key, driver.Exclusive, l.TTL))
		done <- err
	}()
	waitAdvisory(t, admin, "query LIKE '%' || $1 || '%'", table)
	time.Sleep(50 * time.Millisecond)
	res, err := tx.ExecContext(ctx, "UPDATE "+table+" SET expires = statement_timestamp() + $1 * interval '1 microsecond' WHERE name = $2 AND owner = $3",
		l.TTL.Microseconds(), l.Key, l.Owner)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("renewal: %d rows, %v; want 1", n, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return <-done
}

// waitAdvisory waits, for up to 10s, until a session of db's server
// chosen by cond (an SQL condition on pg_stat_activity, whose one
// parameter is arg) waits for an advisory lock.
func waitAdvisory(t *testing.T, db *sql.DB, cond string, arg any) {
	t.Helper()
	ctx := ctxT(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting int
		err := db.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'advisory' AND "+cond, arg).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no acquire waited for the key's advisory lock within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
