package sqldriver_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/sqldriver"
)

// oldDDL is the table that versions of the package before counted holds
// and values created, without the columns lim, weight and val.
func oldDDL(b backend, table string) string {
	if b.name == "mariadb" {
		return "CREATE TABLE " + table + ` (
	name    varbinary(512) NOT NULL,
	owner   varbinary(64) NOT NULL,
	mode    tinyint NOT NULL,
	token   bigint NOT NULL,
	expires datetime(6) NULL,
	PRIMARY KEY (name, owner)
) ENGINE=InnoDB`
	}
	return "CREATE TABLE " + table + ` (
	name    text COLLATE "C" NOT NULL,
	owner   text COLLATE "C" NOT NULL,
	mode    smallint NOT NULL,
	token   bigint NOT NULL,
	expires timestamptz,
	PRIMARY KEY (name, owner)
)`
}

// TestUpgradeFromOldSchema creates the table of the previous version with
// a live exclusive hold in it, written as that version wrote it, and
// checks that this version refuses to work on it with a permanent error
// wrapping ErrOldTable; that eight concurrent CreateTable calls all
// succeed and add the columns; that the old hold is then seen (uncounted,
// no value) and keeps the key; and that counted holds and values work on
// the upgraded table, which a further CreateTable leaves as it is. The
// same, with the statement of UpgradeDDL run as a migration would.
func TestUpgradeFromOldSchema(t *testing.T) {
	t.Run("CreateTable", func(t *testing.T) { testUpgrade(t, false) })
	t.Run("UpgradeDDL", func(t *testing.T) { testUpgrade(t, true) })
}

func testUpgrade(t *testing.T, viaMigration bool) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const table = "locker_upgrade_test"
		opts := &sqldriver.Options{Table: table}
		admin := b.db(t)
		ctx := ctxT(t)
		if _, err := admin.ExecContext(ctx, "DROP TABLE IF EXISTS "+table); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.ExecContext(ctx, oldDDL(b, table)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _ = admin.ExecContext(ctx, "DROP TABLE IF EXISTS "+table)
		})
		key, old := uniqueKey(t, "old"), owner()
		insertOldHold(t, b, admin, table, key, old)

		d := b.driver(t, opts)
		if _, err := d.TryAcquire(ctx, req(uniqueKey(t, "k"), driver.Exclusive, time.Minute)); !errors.Is(err, sqldriver.ErrOldTable) || !driver.IsPermanent(err) {
			t.Fatalf("TryAcquire on the old table: %v; want a permanent error wrapping ErrOldTable", err)
		}

		if viaMigration {
			up, err := sqldriver.UpgradeDDL(b.dialect(), table)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := admin.ExecContext(ctx, up); err != nil {
				t.Fatalf("%s: %v", up, err)
			}
		} else {
			createConcurrently(t, b, opts)
		}

		in := d.(driver.Inspector)
		st, err := in.Inspect(ctx, key)
		if err != nil || len(st.Holders) != 1 || st.Holders[0].Owner != old || st.Holders[0].Token != 7 ||
			st.Holders[0].Weight != 0 || st.Holders[0].Value != "" || st.Limit != 0 || st.Mode != driver.Exclusive {
			t.Fatalf("Inspect of the old version's hold: %+v, %v", st, err)
		}
		if _, err := d.TryAcquire(ctx, counted(key, 3, 1, time.Minute)); !errors.Is(err, driver.ErrLocked) {
			t.Errorf("counted request beside the old version's exclusive hold: %v; want ErrLocked", err)
		}

		sem := uniqueKey(t, "sem")
		r := counted(sem, 3, 2, time.Minute)
		r.Value = "v\x00"
		l := mustAcquire(t, d, r)
		if _, err := d.TryAcquire(ctx, counted(sem, 3, 2, time.Minute)); !errors.Is(err, driver.ErrLocked) {
			t.Errorf("2 more of 3 units: %v; want ErrLocked", err)
		}
		if err := sqldriver.CreateTable(ctx, admin, opts); err != nil {
			t.Fatalf("CreateTable on the upgraded table: %v", err)
		}
		st, err = in.Inspect(ctx, sem)
		if err != nil || len(st.Holders) != 1 || st.Holders[0].Weight != 2 || st.Holders[0].Value != "v\x00" || st.Limit != 3 {
			t.Fatalf("Inspect on the upgraded table: %+v, %v", st, err)
		}
		if err := d.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
		if n := countRows(t, admin, b, table, sem); n != 0 {
			t.Errorf("%d rows left after the release; want 0", n)
		}
	})
}

// insertOldHold writes, in the old version's table, an exclusive hold of
// key by old with token 7, as the old version would.
func insertOldHold(t *testing.T, b backend, admin *sql.DB, table, key, old string) {
	t.Helper()
	ctx := ctxT(t)
	expires := "statement_timestamp() + interval '1 minute'"
	if b.name == "mariadb" {
		expires = "UTC_TIMESTAMP(6) + INTERVAL 1 MINUTE"
	}
	if _, err := admin.ExecContext(ctx, "INSERT INTO "+table+" (name, owner, mode, token, expires) VALUES ("+
		placeholder(b, 1)+", "+placeholder(b, 2)+", 1, 7, "+expires+")", key, old); err != nil {
		t.Fatal(err)
	}
}

// createConcurrently runs CreateTable of opts on b's server from 8
// connections at once, as processes of a new version starting together
// on the old table would.
func createConcurrently(t *testing.T, b backend, opts *sqldriver.Options) {
	t.Helper()
	ctx := ctxT(t)
	const callers = 8
	errs := make([]error, callers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range callers {
		db := b.db(t)
		if err := db.PingContext(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			<-start
			errs[i] = sqldriver.CreateTable(ctxT(t), db, opts)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("CreateTable %d of %d on the old table: %v", i+1, callers, err)
		}
	}
}
