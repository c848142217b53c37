package sqldriver_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/sqldriver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/faultmatrix"
	"github.com/go-locker/locker/internal/sqltest"
)

// matrixTTL is the lease length of the fault matrix on both databases.
const matrixTTL = 500 * time.Millisecond

// envMatrixServer tells dialMatrix, in this process and in the matrix's
// helper children (which inherit the environment), which server the
// target in progress uses: its database/sql driver name and DSN, separated
// by a space.
const envMatrixServer = "LOCKER_SQLDRIVER_MATRIX_SERVER"

// dialMatrix opens a client of the matrix: a pool of its own on the server
// that envMatrixServer names, reached at addr (a fault proxy), and a driver
// on it; the close function closes both.
func dialMatrix(addr string) (driver.Driver, func() error, error) {
	drv, dsn, ok := strings.Cut(os.Getenv(envMatrixServer), " ")
	if !ok {
		return nil, nil, fmt.Errorf("%s not set", envMatrixServer)
	}
	b := backend{name: "postgres", srv: &sqltest.Server{Driver: drv, DSN: dsn}}
	if drv == "mysql" {
		b.name = "mariadb"
	}
	dsn, err := dsnAt(b, addr)
	if err != nil {
		return nil, nil, err
	}
	db, err := sql.Open(drv, clientDSN(drv, dsn))
	if err != nil {
		return nil, nil, err
	}
	d, err := sqldriver.New(db, nil)
	if err != nil {
		_ = db.Close()
		return nil, nil, err
	}
	return d, func() error {
		_ = d.Close()
		return db.Close()
	}, nil
}

// TestFaultMatrix runs the fault × driver matrix against a PostgreSQL
// server and a MariaDB server of its own, which the matrix pauses (every
// process: SIGSTOP), kills (SIGKILL) and restarts with their data, each
// client and helper child with a pool of its own behind a fault proxy of
// its own. The proxies hold bytes back during a black hole instead of
// dropping them: both wire protocols break on a gap in the byte stream.
// Admin revocation deletes the key's holds from the table.
//
// The restart comes a TTL later than the matrix asks (so 4/3 TTL after
// the kill): both databases keep holds across a crash, and both restart
// in less than a TTL here, so that the holder would keep its hold through
// a quick restart (TestFault_Restart checks that it does), while the
// server-kill-restart cell waits for the waiter's Lock before it lets the
// holder unlock, and would wait until the waiter's context ends.
func TestFaultMatrix(t *testing.T) {
	drivertest.Long(t, "the fault matrix takes minutes")
	for _, c := range []struct {
		name  string
		start func() (*sqltest.Server, error)
	}{
		{"postgres", sqltest.StartPostgres},
		{"mariadb", sqltest.StartMariaDB},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, err := c.start()
			if err != nil {
				sqltest.SkipOrFail(t, err)
			}
			t.Cleanup(func() {
				if err := srv.Close(); err != nil {
					t.Error(err)
				}
			})
			if srv.External() {
				t.Skip("external server: the matrix pauses, kills and restarts its server")
			}
			b := backend{name: c.name, srv: srv}
			admin := b.db(t)
			if err := sqldriver.CreateTable(ctxT(t), admin, nil); err != nil {
				t.Fatal(err)
			}
			t.Setenv(envMatrixServer, srv.Driver+" "+srv.DSN)
			faultmatrix.Run(t, matrixTarget(c.name, b, srv, admin))
		})
	}
}

// matrixTarget returns the fault matrix's target for the server srv of
// backend b (named name), administered through admin.
func matrixTarget(name string, b backend, srv *sqltest.Server, admin *sql.DB) faultmatrix.Target {
	p1, p2 := placeholder(b, 1), placeholder(b, 2)
	now := "statement_timestamp()"
	if name == "mariadb" {
		now = "UTC_TIMESTAMP(6)"
	}
	return faultmatrix.Target{
		Name: name,
		TTL:  matrixTTL,
		Addr: func() string { return srv.Addr },
		Dial: dialMatrix,
		Net:  faultmatrix.Partition,
		// Restart keeps the server down for a TTL more: see
		// restartAfterTTL.
		Server: faultmatrix.Server{Pause: srv.Pause, Resume: srv.Resume, Kill: srv.Crash,
			Restart: func() error { time.Sleep(matrixTTL); return srv.Restart() }},
		// An administrator deletes the key's holds.
		Revoke: func(ctx context.Context, key string) error {
			res, err := admin.ExecContext(ctx, "DELETE FROM "+sqldriver.DefaultTable+" WHERE name = "+p1+" AND mode IN (1, 2)", key)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return errors.New("no hold to revoke")
			}
			return nil
		},
		// The live holds and queue entries (MySQL's anchor row is
		// neither).
		Residue: func(ctx context.Context, key string) (int, error) {
			var n int
			err := admin.QueryRowContext(ctx, "SELECT count(*) FROM "+sqldriver.DefaultTable+" WHERE name = "+p1+
				" AND owner <> "+p2+" AND expires > "+now, key, "").Scan(&n)
			return n, err
		},
		DurableTokens: true,
	}
}
