package sqltest

import (
	"context"
	"testing"
	"time"
)

// TestServers starts each server, writes a row, pauses and resumes it,
// crashes and restarts it, and checks that the committed row survived.
func TestServers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func() (*Server, error)
	}{
		{"postgres", StartPostgres},
		{"mariadb", StartMariaDB},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each has a server of its own
			s, err := tc.start()
			if err != nil {
				SkipOrFail(t, err)
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
