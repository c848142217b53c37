package sqldriver_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/sqldriver"
	"github.com/go-locker/locker/internal/testflag"
	"github.com/go-sql-driver/mysql"
)

// envCreateChild makes the test binary a helper child of
// TestCreateTableConcurrent (see serveCreateChild).
const envCreateChild = "LOCKER_SQLDRIVER_CREATETABLE_CHILD"

// createCmd is what the parent of a CreateTable child sends: the database
// to open ("go" empty) and, once every caller is ready, the go-ahead.
type createCmd struct {
	Driver, DSN string
	Go          bool
}

// serveCreateChild runs this process as the helper child of
// TestCreateTableConcurrent when its environment says so, and exits: for
// each database named on stdin it opens a pool, connects, says "ready",
// and on the go-ahead calls CreateTable and writes the outcome. It
// returns at once otherwise.
func serveCreateChild() {
	if os.Getenv(envCreateChild) == "" {
		return
	}
	in := json.NewDecoder(os.Stdin)
	out := json.NewEncoder(os.Stdout)
	var db *sql.DB
	for {
		var c createCmd
		if err := in.Decode(&c); err != nil {
			if db != nil {
				_ = db.Close()
			}
			os.Exit(0)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var err error
		if !c.Go {
			if db != nil {
				_ = db.Close()
			}
			db, err = sql.Open(c.Driver, c.DSN)
			if err == nil {
				err = db.PingContext(ctx)
			}
		} else {
			err = sqldriver.CreateTable(ctx, db, nil)
		}
		cancel()
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		_ = out.Encode(msg)
	}
}

// createChild is the parent's end of a CreateTable child.
type createChild struct {
	in  io.WriteCloser
	out *json.Decoder
}

func startCreateChild(t *testing.T) *createChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envCreateChild+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = in.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return &createChild{in: in, out: json.NewDecoder(bufio.NewReader(out))}
}

// send sends a command to the child.
func (c *createChild) send(cmd createCmd) error {
	b, _ := json.Marshal(cmd)
	_, err := c.in.Write(append(b, '\n'))
	return err
}

func (c *createChild) answer() error {
	var msg string
	if err := c.out.Decode(&msg); err != nil {
		return fmt.Errorf("helper child: %w", err)
	}
	if msg != "" {
		return fmt.Errorf("helper child: %s", msg)
	}
	return nil
}

// freshNamespace creates an empty namespace on b's server and returns a
// DSN whose unqualified tables live in it, and a function that drops it:
// a database on MariaDB, a schema (first in search_path) on PostgreSQL,
// whose CREATE DATABASE takes a quarter of a second here.
func freshNamespace(t *testing.T, b backend, admin *sql.DB, name string) (dsn string, drop func()) {
	t.Helper()
	kind := "DATABASE"
	if b.name == "postgres" {
		kind = "SCHEMA"
	}
	if _, err := admin.ExecContext(ctxT(t), "CREATE "+kind+" "+name); err != nil {
		t.Fatal(err)
	}
	drop = func() {
		q := "DROP " + kind + " " + name
		if b.name == "postgres" {
			q += " CASCADE"
		}
		if _, err := admin.ExecContext(ctxT(t), q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
	if b.name == "mariadb" {
		cfg, err := mysql.ParseDSN(b.srv.DSN)
		if err != nil {
			t.Fatal(err)
		}
		cfg.DBName = name
		return cfg.FormatDSN(), drop
	}
	u, err := url.Parse(b.srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String(), drop
}

// connectedPools opens n pools on dsn, each with a connection made, so
// that their first statements start together. The caller closes them.
func connectedPools(t *testing.T, b backend, dsn string, n int) []*sql.DB {
	t.Helper()
	dbs := make([]*sql.DB, n)
	for i := range dbs {
		db, err := sql.Open(b.srv.Driver, dsn)
		if err != nil {
			t.Fatal(err)
		}
		dbs[i] = db
		if err := db.PingContext(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	return dbs
}

// TestCreateTableConcurrent has nine callers create the lease table
// (sqldriver.CreateTable(ctx, db, nil)) in a fresh namespace at the same
// moment, 20 times (5 with -short): eight in this process, each on a
// connection of its own, and one in a helper process. Every call must succeed (PostgreSQL's
// CREATE TABLE IF NOT EXISTS alone fails with a duplicate key in
// pg_type_typname_nsp_index when it races with itself), and the table
// must then work.
func TestCreateTableConcurrent(t *testing.T) {
	rounds := 20
	if !testflag.Long() {
		rounds = 5
	}
	forEachBackend(t, func(t *testing.T, b backend) {
		if b.srv.External() {
			t.Skip("external server: the test creates and drops databases")
		}
		admin := b.db(t)
		child := startCreateChild(t)
		const callers = 8
		for round := range rounds {
			dsn, drop := freshNamespace(t, b, admin, fmt.Sprintf("locker_create_%d_%d", round, time.Now().UnixNano()))
			if err := child.send(createCmd{Driver: b.srv.Driver, DSN: dsn}); err != nil {
				t.Fatal(err)
			}
			dbs := connectedPools(t, b, dsn, callers)
			if err := child.answer(); err != nil {
				t.Fatal(err)
			}
			start := make(chan struct{})
			errs := make([]error, callers+1)
			var wg sync.WaitGroup
			for i, db := range dbs {
				wg.Go(func() {
					<-start
					errs[i] = sqldriver.CreateTable(ctxT(t), db, nil)
				})
			}
			close(start)
			if err := child.send(createCmd{Go: true}); err != nil {
				t.Fatal(err)
			}
			errs[callers] = child.answer()
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("round %d: caller %d of %d: CreateTable: %v", round, i, callers+1, err)
				}
			}
			d, err := sqldriver.NewPolling(dbs[0], nil)
			if err != nil {
				t.Fatal(err)
			}
			l := mustAcquire(t, d, req("k", driver.Exclusive, time.Minute))
			if err := d.Release(ctxT(t), l); err != nil {
				t.Error(err)
			}
			for _, db := range dbs {
				_ = db.Close()
			}
			drop()
			if t.Failed() {
				return
			}
		}
	})
}

// TestCreateTableBesideRawDDL races CreateTable with the plain DDL (what
// a migration that does not take CreateTable's lock runs): the plain
// statements may fail on PostgreSQL, CreateTable must not, since an
// "already exists" error leads it to check that the table is there.
func TestCreateTableBesideRawDDL(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		if b.srv.External() {
			t.Skip("external server: the test creates and drops databases")
		}
		admin := b.db(t)
		ddl, err := sqldriver.DDL(b.dialect(), "")
		if err != nil {
			t.Fatal(err)
		}
		const each, rounds = 4, 10
		rawFailed := 0
		for round := range rounds {
			dsn, drop := freshNamespace(t, b, admin, fmt.Sprintf("locker_rawddl_%d_%d", round, time.Now().UnixNano()))
			dbs := connectedPools(t, b, dsn, 2*each)
			start := make(chan struct{})
			errs := make([]error, len(dbs))
			var wg sync.WaitGroup
			for i, db := range dbs {
				wg.Go(func() {
					<-start
					if i < each {
						errs[i] = sqldriver.CreateTable(ctxT(t), db, nil)
					} else {
						_, errs[i] = db.ExecContext(ctxT(t), ddl)
					}
				})
			}
			close(start)
			wg.Wait()
			for i, err := range errs {
				switch {
				case i < each && err != nil:
					t.Errorf("round %d: CreateTable beside plain DDL: %v", round, err)
				case i >= each && err != nil:
					rawFailed++
				}
			}
			for _, db := range dbs {
				_ = db.Close()
			}
			drop()
		}
		t.Logf("plain DDL failed %d times of %d (CreateTable: 0 of %d)", rawFailed, each*rounds, each*rounds)
	})
}
