package sqldriver_test

import (
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/sqldriver"
	"github.com/go-locker/locker/internal/sqltest"
	"github.com/go-locker/locker/internal/testflag"
)

// tableOf creates a lease table of the test's own, so that row counts do
// not see other tests' keys, and returns its options.
func tableOf(t *testing.T, b backend, name string) *sqldriver.Options {
	t.Helper()
	opts := &sqldriver.Options{Table: name}
	if err := sqldriver.CreateTable(ctxT(t), b.db(t), opts); err != nil {
		t.Fatal(err)
	}
	return opts
}

// countRows returns the rows of table, or of one key of it when key is
// not empty.
func countRows(t *testing.T, db *sql.DB, b backend, table, key string) int {
	t.Helper()
	q := "SELECT count(*) FROM " + table
	var args []any
	if key != "" {
		q += " WHERE name = " + placeholder(b, 1)
		args = append(args, key)
	}
	var n int
	if err := db.QueryRowContext(ctxT(t), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// placeholder returns the nth bind parameter in b's SQL.
func placeholder(b backend, n int) string {
	if b.name == "postgres" {
		return fmt.Sprintf("$%d", n)
	}
	return "?"
}

// TestReleasedKeysLeaveNoRows locks and releases 10 000 distinct keys
// (400 with -short), sixteen at a time, exclusive and shared, and checks
// that the lease table is back to the rows it had: a released key keeps
// no row (PostgreSQL: no counter row; MySQL: its anchor goes with its last
// live row).
func TestReleasedKeysLeaveNoRows(t *testing.T) {
	n := 10000
	if !testflag.Long() {
		n = 400
	}
	forEachBackend(t, func(t *testing.T, b backend) {
		const table = "locker_rows_test"
		opts := tableOf(t, b, table)
		admin := b.db(t)
		before := countRows(t, admin, b, table, "")
		const workers = 16
		var next atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for w := range workers {
			d := b.driver(t, opts)
			wg.Go(func() {
				ctx := ctxT(t)
				for i := next.Add(1); i <= int64(n); i = next.Add(1) {
					mode := driver.Exclusive
					if i%2 == 0 {
						mode = driver.Shared
					}
					l, err := d.TryAcquire(ctx, req(fmt.Sprintf("rows/%d/%d", w, i), mode, time.Minute))
					if err == nil {
						err = d.Release(ctx, l)
					}
					if err != nil {
						t.Errorf("key %d: %v", i, err)
						return
					}
				}
			})
		}
		wg.Wait()
		after := countRows(t, admin, b, table, "")
		t.Logf("%d keys locked and released in %v: %d rows before, %d after", n, time.Since(start).Round(time.Millisecond), before, after)
		if after != before {
			t.Errorf("%d rows in the lease table after locking and releasing %d keys; want %d as before", after, n, before)
		}
	})
}

// TestTokensAcrossReleases checks that a key's tokens keep increasing
// while its rows come and go: each release leaves no row, and the next
// grant, drawn from the database's clock, is still greater. Refused
// attempts write nothing and leave the next token as it would be.
func TestTokensAcrossReleases(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const table = "locker_tokens_test"
		opts := tableOf(t, b, table)
		admin := b.db(t)
		d, other := b.driver(t, opts), b.driver(t, opts)
		ctx := ctxT(t)
		key := uniqueKey(t, "k")
		var last uint64
		for i := range 50 {
			mode := driver.Exclusive
			if i%3 == 0 {
				mode = driver.Shared
			}
			l := mustAcquire(t, d, req(key, mode, time.Minute))
			if l.Token <= last {
				t.Fatalf("grant %d: token %d after %d; want strictly increasing", i, l.Token, last)
			}
			last = l.Token
			if i%5 == 0 {
				rows := countRows(t, admin, b, table, key)
				for range 3 {
					if _, err := other.TryAcquire(ctx, req(key, driver.Exclusive, time.Minute)); !errors.Is(err, driver.ErrLocked) {
						t.Fatalf("refused attempt: %v; want ErrLocked", err)
					}
				}
				if got := countRows(t, admin, b, table, key); got != rows {
					t.Fatalf("refused attempts changed the key's rows from %d to %d", rows, got)
				}
			}
			if err := d.Release(ctx, l); err != nil {
				t.Fatal(err)
			}
			if n := countRows(t, admin, b, table, key); n != 0 {
				t.Fatalf("released key has %d rows; want 0", n)
			}
		}
	})
}

// TestTokensAfterCounterOfOlderVersion checks a table written by an older
// version of the package, which kept a counter row per key (owner ”,
// mode 0, token: the last one handed out): the next token is greater than
// the counter, and the key's rows go with its release.
func TestTokensAfterCounterOfOlderVersion(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const table = "locker_legacy_test"
		opts := tableOf(t, b, table)
		admin := b.db(t)
		key := uniqueKey(t, "k")
		q := "INSERT INTO " + table + " (name, owner, mode, token) VALUES (" + placeholder(b, 1) + ", '', 0, 42)"
		if _, err := admin.ExecContext(ctxT(t), q, key); err != nil {
			t.Fatal(err)
		}
		d := b.driver(t, opts)
		l := mustAcquire(t, d, req(key, driver.Exclusive, time.Minute))
		if l.Token <= 42 {
			t.Errorf("token %d after an older version's counter at 42", l.Token)
		}
		if err := d.Release(ctxT(t), l); err != nil {
			t.Fatal(err)
		}
		if n := countRows(t, admin, b, table, key); n != 0 {
			t.Errorf("%d rows left after the release of a key with an older version's counter row; want 0", n)
		}
	})
}

// TestContentionNoDeadlock has eight clients acquire (queued or not),
// refresh, batch-refresh and release exclusive and shared holds of three
// keys, and leave their queues, for 1.5 seconds: every call must be
// answered with a grant, a refusal or ErrNotHeld, never a deadlock or a
// lock timeout. (A MySQL release that read the key's other rows with
// locking reads, to keep the anchor while they live, deadlocked here: a
// range read locks the next key's first row too.)
func TestContentionNoDeadlock(t *testing.T) {
	forEachBackendParallel(t, func(t *testing.T, b backend) {
		keys := []string{uniqueKey(t, "a"), uniqueKey(t, "b"), uniqueKey(t, "c")}
		ct := &contention{keys: keys, stop: time.Now().Add(1500 * time.Millisecond)}
		var wg sync.WaitGroup
		for c := range 8 {
			d := b.driver(t, nil)
			br := d.(driver.BatchRefresher)
			wg.Go(func() { ct.client(t, c, d, br) })
		}
		wg.Wait()
		t.Logf("%d calls, %d grants", ct.calls.Load(), ct.grants.Load())
		if ct.grants.Load() < 10 {
			t.Errorf("only %d grants: the test did not exercise the keys", ct.grants.Load())
		}
	})
}

// contention is the state TestContentionNoDeadlock's clients share.
type contention struct {
	keys          []string
	stop          time.Time
	grants, calls atomic.Int64
}

// client is client number c of TestContentionNoDeadlock, on d (br is its
// BatchRefresher): until the stop time it acquires (queued or not),
// refreshes, batch-refreshes and releases random holds and leaves its
// queue, checking that every call is answered with a grant, a refusal or
// ErrNotHeld; then it lets go of what it holds or waits for.
func (ct *contention) client(t *testing.T, c int, d driver.Driver, br driver.BatchRefresher) {
	q := d
	r := rand.New(rand.NewPCG(uint64(c), uint64(time.Now().UnixNano())))
	ctx := ctxT(t)
	var held []driver.Lease
	check := func(what string, err error) {
		ct.calls.Add(1)
		if err != nil && !errors.Is(err, driver.ErrLocked) && !errors.Is(err, driver.ErrNotHeld) {
			t.Errorf("client %d: %s: %v", c, what, err)
		}
	}
	var pending *driver.Request // a queued request, retried until granted or abandoned
	for time.Now().Before(ct.stop) && !t.Failed() {
		rq := pending
		if rq == nil {
			rq = &driver.Request{Key: ct.keys[r.IntN(len(ct.keys))], Owner: owner(), Mode: driver.Mode(r.IntN(2)), TTL: time.Second}
		}
		var l driver.Lease
		var err error
		if pending != nil || r.IntN(2) == 0 {
			l, err = tryQueued(q, ctx, *rq)
			pending = rq
		} else {
			l, err = d.TryAcquire(ctx, *rq)
		}
		check("acquire", err)
		if err == nil {
			ct.grants.Add(1)
			held = append(held, l)
			pending = nil
		} else if pending != nil && r.IntN(10) == 0 {
			// Give up waiting: leave the queue.
			check("leave", d.Release(ctx, driver.Lease{Key: rq.Key, Owner: rq.Owner, Mode: rq.Mode, Abandoned: true}))
			pending = nil
		}
		if len(held) > 0 && r.IntN(3) == 0 {
			_, err := d.Refresh(ctx, held[0])
			check("refresh", err)
		}
		if len(held) > 1 && r.IntN(3) == 0 {
			for _, err := range br.RefreshBatch(ctx, held) {
				check("batch refresh", err)
			}
		}
		if len(held) > 0 && r.IntN(2) == 0 {
			i := r.IntN(len(held))
			check("release", d.Release(ctx, held[i]))
			held = append(held[:i], held[i+1:]...)
		}
	}
	if pending != nil {
		check("leave", d.Release(ctx, driver.Lease{Key: pending.Key, Owner: pending.Owner, Mode: pending.Mode, Abandoned: true}))
	}
	for _, l := range held {
		check("release", d.Release(ctx, l))
	}
}

// TestDeadlockVictimRetried makes InnoDB choose an acquire as the victim
// of a deadlock, and checks that the driver runs the rolled-back
// transaction again instead of handing "Deadlock found" to its caller (as
// the database asks of its clients). Concurrent acquires of a key can
// deadlock on MySQL, rarely, on the gap locks around the key's anchor row,
// which each release deletes; this test makes a deadlock certain: the
// test's transaction locks an expired holder's row, the acquire locks the
// anchor and waits for that row to purge it, and the test's transaction
// then asks for the anchor. The test's transaction has written rows of
// other keys, so InnoDB rolls back the acquire, which has written less.
func TestDeadlockVictimRetried(t *testing.T) {
	if myServer == nil {
		sqltest.SkipOrFail(t, myServerErr)
	}
	b := backend{name: "mariadb", srv: myServer}
	const table = "deadlock_victim"
	opts := tableOf(t, b, table)
	d := b.directDriver(t, opts)
	key := uniqueKey(t, "k")
	ctx := ctxT(t)
	expired := mustAcquire(t, d, req(key, driver.Exclusive, 50*time.Millisecond))
	time.Sleep(150 * time.Millisecond)

	admin := b.db(t)
	tx, err := admin.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for i := range 20 { // weight, so that the acquire is the victim
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+table+" (name, owner, mode, token) VALUES (?, 'ballast', 0, 0)", fmt.Sprintf("%s/ballast/%d", key, i)); err != nil {
			t.Fatal(err)
		}
	}
	var owner string
	if err := tx.QueryRowContext(ctx, "SELECT owner FROM "+table+" WHERE name = ? AND owner = ? FOR UPDATE", key, expired.Owner).Scan(&owner); err != nil {
		t.Fatal(err)
	}
	type result struct {
		l   driver.Lease
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := d.TryAcquire(ctx, req(key, driver.Exclusive, 10*time.Second))
		done <- result{l, err}
	}()
	waitStatements(t, admin, "DELETE FROM `"+table+"` %", 1) // the acquire's purge waits for the row
	// The anchor: the acquire holds it, so this closes the cycle.
	if _, err := tx.ExecContext(ctx, "SELECT owner FROM "+table+" WHERE name = ? AND owner = '' FOR UPDATE", key); err != nil {
		t.Fatalf("the test's transaction was the deadlock's victim, not the acquire: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("acquire: %v", r.err)
	}
	if err := d.Release(ctx, r.l); err != nil {
		t.Fatal(err)
	}
}

// waitStatements waits until n statements whose text is like pattern are
// running on db's server, by the process list.
func waitStatements(t *testing.T, db *sql.DB, pattern string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var running int
		err := db.QueryRowContext(ctxT(t), "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE ?", pattern).Scan(&running)
		if err != nil {
			t.Fatal(err)
		}
		if running >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d statements like %q after 10s, want %d", running, pattern, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
