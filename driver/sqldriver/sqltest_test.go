// The tests of the SQL servers that internal/sqltest starts live here,
// where the database/sql drivers they open are registered.
package sqldriver_test

import (
	"context"
	"database/sql"
	"os"
	"testing"
	"time"

	"github.com/go-locker/locker/internal/sqltest"
)

// TestServers starts each server, writes a row, pauses and resumes it,
// crashes and restarts it, and checks that the committed row survived.
func TestSQLServers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func() (*sqltest.Server, error)
	}{
		{"postgres", sqltest.StartPostgres},
		{"mariadb", sqltest.StartMariaDB},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each has a server of its own
			s, err := tc.start()
			if err != nil {
				sqltest.SkipOrFail(t, err)
			}
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Error(err)
				}
			})
			db := s.Open(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for _, q := range []string{
				"CREATE TABLE sqltest_probe (v INT)",
				"INSERT INTO sqltest_probe VALUES (42)",
			} {
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			if s.External() {
				t.Skip("external server: no crash test")
			}
			if s.PID() == 0 {
				t.Fatal("PID() = 0 for a running server")
			}
			checkPause(t, s, db)
			if err := s.Restart(); err != nil {
				t.Fatal(err)
			}
			var v int
			for range 3 { // the pool's connections died with the server
				if err = db.QueryRowContext(ctx, "SELECT v FROM sqltest_probe").Scan(&v); err == nil {
					break
				}
			}
			if err != nil || v != 42 {
				t.Fatalf("after a crash and restart: v = %d, %v; want 42", v, err)
			}
		})
	}
}

// checkPause checks that the paused server s answers nothing on db, not
// even on a connection opened before, and answers again once resumed.
func checkPause(t *testing.T, s *sqltest.Server, db *sql.DB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A paused server answers nothing, not even on a connection
	// opened before; resumed, it answers again.
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = conn.PingContext(pctx)
	pcancel()
	_ = conn.Close()
	if err == nil {
		t.Error("a paused server answered a ping")
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("ping after Resume: %v", err)
	}
}

// TestMariaDBTmpdir checks that a MariaDB server leaves the temporary
// files of another one alone: mariadbd deletes every #sql file in its
// tmpdir when it starts, so two servers that shared /tmp deleted each
// other's temporary tables, and a mariadb-install-db running beside
// another server's start failed ("Error on delete of
// '/tmp/#sql-temptable-…'"). Each server has a tmpdir of its own.
func TestMariaDBTmpdir(t *testing.T) {
	first, err := sqltest.StartMariaDB()
	if err != nil {
		sqltest.SkipOrFail(t, err)
	}
	defer first.Close()
	if first.External() {
		t.Skip("an external server (" + sqltest.EnvMySQLDSN + "): its tmpdir may be any")
	}
	var tmpdir string
	if err := first.Open(t).QueryRow("SELECT @@tmpdir").Scan(&tmpdir); err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(tmpdir, "#sql-locker-probe-")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	defer os.Remove(f.Name())
	second, err := sqltest.StartMariaDB()
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if _, err := os.Stat(f.Name()); err != nil {
		t.Errorf("a #sql file in the first server's tmpdir (%s): %v; the second server's start deleted it", tmpdir, err)
	}
}
