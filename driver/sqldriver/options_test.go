package sqldriver_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/sqldriver"
)

// TestTableNames checks that hostile table names are refused before any
// SQL is sent, and that valid ones, qualified or not, are quoted and
// work.
func TestTableNames(t *testing.T) {
	for _, name := range []string{
		"x; DROP TABLE locker_leases", `a"b`, "a`b", "1abc", "a.b.c", "a..b", ".a", "a b", "ключ",
		strings.Repeat("a", 64), "a-b", "a'b",
	} {
		for _, d := range []sqldriver.Dialect{sqldriver.PostgreSQL, sqldriver.MySQL} {
			if _, err := sqldriver.DDL(d, name); err == nil {
				t.Errorf("DDL(%v, %q) accepted the name", d, name)
			}
			if _, err := sqldriver.NewPolling(new(sql.DB), &sqldriver.Options{Table: name, Dialect: d}); err == nil {
				t.Errorf("NewPolling(Table: %q, %v) accepted the name", name, d)
			}
		}
	}
	if _, err := sqldriver.NewPolling(nil, nil); err == nil {
		t.Error("NewPolling(nil) succeeded")
	}
	forEachBackend(t, func(t *testing.T, b backend) {
		db := b.db(t)
		ctx := ctxT(t)
		qualifier := "public"
		if b.name == "mariadb" {
			qualifier = "locker"
		}
		for _, table := range []string{"locker_Custom_1", qualifier + ".locker_qualified"} {
			opts := &sqldriver.Options{Table: table}
			if err := sqldriver.CreateTable(ctx, db, opts); err != nil {
				t.Fatalf("CreateTable(%q): %v", table, err)
			}
			if err := sqldriver.CreateTable(ctx, db, opts); err != nil {
				t.Fatalf("second CreateTable(%q): %v", table, err)
			}
			d := b.driver(t, opts)
			// A key that would break SQL built by concatenation.
			key := "'; DROP TABLE locker_leases; -- \\ \" ` " + owner()
			l := mustAcquire(t, d, req(key, driver.Exclusive, time.Minute))
			if _, err := d.TryAcquire(ctx, req(key, driver.Exclusive, time.Minute)); !errors.Is(err, driver.ErrLocked) {
				t.Errorf("table %q: second owner: %v; want ErrLocked", table, err)
			}
			// The default table does not see the custom table's lock.
			ld := mustAcquire(t, b.driver(t, nil), req(key, driver.Exclusive, time.Minute))
			if err := d.Release(ctx, l); err != nil {
				t.Error(err)
			}
			if err := b.driver(t, nil).Release(ctx, ld); err != nil {
				t.Error(err)
			}
		}
	})
}

// TestMissingTable checks that a missing table gives a permanent error
// that names it, through the driver and through a Mutex, which must not
// retry it forever.
func TestMissingTable(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		d := b.driver(t, &sqldriver.Options{Table: "no_such_locker_table"})
		_, err := d.TryAcquire(ctxT(t), req(uniqueKey(t, "k"), driver.Exclusive, time.Second))
		if !errors.Is(err, sqldriver.ErrNoTable) || !driver.IsPermanent(err) || !strings.Contains(err.Error(), "no_such_locker_table") {
			t.Fatalf("TryAcquire on a missing table: %v; want a permanent error wrapping ErrNoTable that names the table", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = locker.NewMutex(d, uniqueKey(t, "m")).LockContext(ctx)
		if !errors.Is(err, sqldriver.ErrNoTable) || ctx.Err() != nil {
			t.Fatalf("Lock on a missing table: %v (ctx %v); want ErrNoTable at once", err, ctx.Err())
		}
	})
}

// TestDDLDocumented checks that the package documentation shows the DDL
// that CreateTable runs, and the upgrade from an older table (UpgradeDDL),
// for both dialects.
func TestDDLDocumented(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(strings.Fields(strings.ReplaceAll(string(src), "//", "")), " ")
	for _, d := range []sqldriver.Dialect{sqldriver.PostgreSQL, sqldriver.MySQL} {
		ddl, err := sqldriver.DDL(d, "")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(doc, strings.Join(strings.Fields(ddl), " ")) {
			t.Errorf("doc.go does not show the %v DDL:\n%s", d, ddl)
		}
		up, err := sqldriver.UpgradeDDL(d, "")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(doc, strings.Join(strings.Fields(up), " ")) {
			t.Errorf("doc.go does not show the %v upgrade:\n%s", d, up)
		}
	}
	if _, err := sqldriver.UpgradeDDL(sqldriver.Detect, ""); err == nil {
		t.Error("UpgradeDDL(Detect) succeeded")
	}
	if _, err := sqldriver.DDL(sqldriver.Detect, ""); err == nil {
		t.Error("DDL(Detect) succeeded")
	}
}

// TestDialect checks the dialect detection and the driver New picks.
func TestDialect(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		db := b.db(t)
		want := b.dialect()
		p, err := sqldriver.NewPolling(db, nil)
		if err != nil {
			t.Fatal(err)
		}
		if p.Dialect() != want || p.Table() != sqldriver.DefaultTable {
			t.Errorf("Dialect, Table = %v, %q; want %v, %q", p.Dialect(), p.Table(), want, sqldriver.DefaultTable)
		}
		d, err := sqldriver.New(db, nil)
		if err != nil {
			t.Fatal(err)
		}
		if d.Capabilities().Notify != (want == sqldriver.PostgreSQL) {
			t.Errorf("New: SupportsNotify = %v, want it on PostgreSQL only", d.Capabilities().Notify)
		}
		if !d.Capabilities().Notify {
			if _, err := d.Subscribe(ctxT(t), "k"); !errors.Is(err, errors.ErrUnsupported) || !driver.IsPermanent(err) {
				t.Errorf("Subscribe on a driver that does not notify: %v; want a permanent ErrUnsupported", err)
			}
		}
		d, err = sqldriver.New(db, &sqldriver.Options{NoNotify: true})
		if err != nil {
			t.Fatal(err)
		}
		if d.Capabilities().Notify {
			t.Errorf("New with NoNotify: SupportsNotify = true")
		}
		if err := d.Close(); err != nil {
			t.Errorf("Close of a driver that does not notify: %v", err)
		}
	})
}
