package sqldriver_test

import (
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/sqldriver"
	"github.com/go-locker/locker/internal/sqltest"
)

// TestTokenClockAfterLock checks, on PostgreSQL, that a grant's token is
// greater than the token of a grant of the same key that was made (and
// released) while the acquire waited for the key's advisory lock: the
// clock that the token takes must be read once the acquire holds the
// lock, not when its statements reached the server. No row remembers a
// released grant's token; only the clock stands for it.
//
// With pgx's simple protocol (default_query_exec_mode=simple_protocol,
// as behind PgBouncer) the acquire's BEGIN, advisory lock and read are one
// message, and statement_timestamp() is that message's receipt for all
// three, before the lock wait. With the extended protocol each statement's
// Bind sets it anew, after the lock; the test runs both.
//
// The construction, with the driver's own TryAcquire and Release for
// both grants:
//
//   - Owner A's driver has a pool of one connection, on which the test
//     takes the key's advisory lock at session level (pg_advisory_lock).
//   - B's TryAcquire, through another driver, starts and waits for that
//     lock; the test sees it waiting in pg_stat_activity (B's
//     connections carry an application_name of their own), then sleeps
//     50 ms, so that every clock read from now on is later than B's
//     message's receipt.
//   - A's TryAcquire runs on the connection that holds the lock: its
//     pg_advisory_xact_lock is granted at once, since advisory locks are
//     re-entrant within a session even while others wait for them, which
//     stands for A's acquire being served before B's. A is granted a
//     token (from a clock read now, so greater than B's arrival) and
//     releases it, which leaves no row.
//   - The test releases the session lock (pg_advisory_unlock, which must
//     report that the session still held it, so B cannot have been
//     served before A), and B is served: it sees no rows, and its token
//     is its clock. Read at its message's receipt, that clock is smaller
//     than A's token, and B is granted the key with a token smaller than
//     that of an earlier grant.
func TestTokenClockAfterLock(t *testing.T) {
	if pgServer == nil {
		sqltest.SkipOrFail(t, pgServerErr)
	}
	b := backend{name: "postgres", srv: pgServer}
	for _, mode := range []string{"simple_protocol", "cache_statement"} {
		t.Run(mode, func(t *testing.T) {
			const (
				table = "locker_tokenclock_test"
				ttl   = 10 * time.Second
			)
			opts := tableOf(t, b, table)
			ctx := ctxT(t)
			key := uniqueKey(t, "k")
			id := sqldriver.LockID(key)
			app := "locker_tokenclock_" + owner()[:8]

			// A: one connection, which holds the key's advisory lock at
			// session level.
			adb := b.db(t)
			adb.SetMaxOpenConns(1)
			da, err := sqldriver.NewPolling(adb, opts)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := adb.ExecContext(ctx, "SELECT pg_advisory_lock($1)", id); err != nil {
				t.Fatal(err)
			}

			// B: waits for that lock.
			done := acquireOn(t, b, opts, "default_query_exec_mode="+mode+"&application_name="+app, key, ttl)
			admin := b.db(t)
			waitAdvisory(t, admin, "application_name = $1", app)
			time.Sleep(50 * time.Millisecond)

			// A: granted and released while B waits.
			la, err := da.TryAcquire(ctx, req(key, driver.Exclusive, ttl))
			if err != nil {
				t.Fatalf("A's TryAcquire, on the session that holds the key's lock: %v", err)
			}
			if err := da.Release(ctx, la); err != nil {
				t.Fatal(err)
			}
			select {
			case r := <-done:
				t.Fatalf("B's acquire returned (%+v, %v) before the key's lock was released", r.l, r.err)
			default:
			}
			var held bool
			if err := adb.QueryRowContext(ctx, "SELECT pg_advisory_unlock($1)", id).Scan(&held); err != nil {
				t.Fatal(err)
			}
			if !held {
				t.Fatal("A's session lost the key's advisory lock: B may have been served before A")
			}

			r := <-done
			if r.err != nil {
				t.Fatalf("B's TryAcquire: %v", r.err)
			}
			t.Logf("A's token %d, then B's %d (B - A = %d µs)", la.Token, r.l.Token, int64(r.l.Token)-int64(la.Token))
			if r.l.Token <= la.Token {
				t.Errorf("B was granted token %d after A's grant of token %d was released: want a greater token", r.l.Token, la.Token)
			}
		})
	}
}

// A leaseResult is what a TryAcquire returned.
type leaseResult struct {
	l   driver.Lease
	err error
}

// acquireOn starts a TryAcquire of key (exclusive, for ttl) through a
// driver of its own on b's server, its DSN extended with params, and
// returns the channel that receives the result.
func acquireOn(t *testing.T, b backend, opts *sqldriver.Options, params, key string, ttl time.Duration) <-chan leaseResult {
	t.Helper()
	dsn := b.srv.DSN
	if strings.Contains(dsn, "?") {
		dsn += "&"
	} else {
		dsn += "?"
	}
	db, err := sqldriver.New(b.dbOn(t, dsn+params), opts)
	if err != nil {
		t.Fatal(err)
	}
	closeAtCleanup(t, db)
	done := make(chan leaseResult, 1)
	ctx := ctxT(t)
	go func() {
		l, err := db.TryAcquire(ctx, req(key, driver.Exclusive, ttl))
		done <- leaseResult{l, err}
	}()
	return done
}
