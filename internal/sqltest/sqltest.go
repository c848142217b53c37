// Package sqltest starts real SQL database servers for tests: PostgreSQL
// and MariaDB from Debian's packages (postgresql, mariadb-server).
//
// [StartPostgres] runs initdb in a new temporary directory and starts
// postgres on a free loopback port, with its Unix socket in that directory,
// so that it neither uses nor disturbs a cluster the package may have
// started on port 5432. PostgreSQL refuses to run as root: when the test
// runs as root, the directory is given to the "postgres" user and initdb
// and postgres run as that user. [StartMariaDB] does the same with
// mariadb-install-db and mariadbd (which may run as root).
//
// Both wait until the server accepts connections, return a [Server] whose
// DSN opens its database with pgx's database/sql driver ("pgx") or
// go-sql-driver/mysql ("mysql"); [Server.Close] shuts the server down
// cleanly. Its process is controlled through package proc, in a process
// group of its own: [Server.Crash] kills the server (SIGKILL) and
// [Server.Restart] starts it again on the same port and data directory,
// as after a crash: committed data survives. [Server.Pause] and
// [Server.Resume] stop and continue it (SIGSTOP, SIGCONT), with every
// process of PostgreSQL's.
//
// LOCKER_POSTGRES_DSN and LOCKER_MYSQL_DSN name external servers to use
// instead; process controls then return an error wrapping
// errors.ErrUnsupported. When a server's binaries are missing, Start*
// return an error wrapping [ErrNotInstalled], which [SkipOrFail] turns into
// a skip, or a failure when LOCKER_REQUIRE_SERVERS=1.
package sqltest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-locker/locker/internal/proc"
)

const (
	// EnvPostgresDSN names an external PostgreSQL database (a pgx DSN) to
	// use instead of starting a server.
	EnvPostgresDSN = "LOCKER_POSTGRES_DSN"
	// EnvMySQLDSN names an external MySQL or MariaDB database (a
	// go-sql-driver/mysql DSN) to use instead of starting a server.
	EnvMySQLDSN = "LOCKER_MYSQL_DSN"
	// EnvRequireServers, set to "1", turns missing server binaries into a
	// test failure instead of a skip (the variable of package proc).
	EnvRequireServers = proc.EnvRequireServers
)

// ErrNotInstalled is wrapped by the errors of StartPostgres and
// StartMariaDB when the server's binaries are missing.
var ErrNotInstalled = errors.New("database server not installed")

// startTimeout bounds how long a server may take to accept connections.
const startTimeout = 60 * time.Second

// Server is a database server used by tests.
type Server struct {
	// Driver is the database/sql driver name for DSN: "pgx" or "mysql".
	Driver string
	// DSN opens the server's test database.
	DSN string
	// Addr is the server's loopback host:port ("" for an external one).
	Addr string

	name    string // "postgres" or "mariadb", for messages
	dir     string // temporary directory, removed by Close
	logFile string
	cred    *syscall.Credential // whom the server runs as (nil: the caller)
	srv     *proc.Server
}

// SkipOrFail ends tb because of err from StartPostgres or StartMariaDB:
// it skips tb when the binaries are missing and LOCKER_REQUIRE_SERVERS is
// not "1", and fails it otherwise.
func SkipOrFail(tb testing.TB, err error) {
	tb.Helper()
	proc.SkipOrFail(tb, "sqltest", err, ErrNotInstalled)
}

// Required reports whether LOCKER_REQUIRE_SERVERS=1.
func Required() bool { return proc.Required() }

// External reports whether the server is one named by an environment
// variable, which the tests do not control.
func (s *Server) External() bool { return s.srv != nil && s.srv.External() }

// Open opens a new *sql.DB on the server's database and registers its
// Close with tb.Cleanup.
func (s *Server) Open(tb testing.TB) *sql.DB {
	tb.Helper()
	db, err := sql.Open(s.Driver, s.DSN)
	if err != nil {
		tb.Fatalf("sqltest: open %s: %v", s.name, err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	return db
}

// StartPostgres returns the database named by LOCKER_POSTGRES_DSN, or
// starts a PostgreSQL server (see the package documentation). The caller
// must call Close.
func StartPostgres() (*Server, error) {
	if dsn := os.Getenv(EnvPostgresDSN); dsn != "" {
		return external("pgx", "postgres", dsn)
	}
	bindir, err := postgresBin()
	if err != nil {
		return nil, err
	}
	s := &Server{Driver: "pgx", name: "postgres"}
	if err := s.mkdir("locker-pg-"); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		if err := s.runAs("postgres"); err != nil {
			s.removeDir()
			return nil, err
		}
	}
	data := filepath.Join(s.dir, "data")
	initdb := exec.Command(filepath.Join(bindir, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	proc.Prepare(initdb)
	initdb.Dir = s.dir // the postgres user may not enter the test's directory
	if out, err := initdb.CombinedOutput(); err != nil {
		s.removeDir()
		return nil, fmt.Errorf("sqltest: initdb: %v\n%s", err, out)
	}
	// SIGINT: PostgreSQL's fast shutdown.
	err = s.startOnFreePort(syscall.SIGINT, func(port int) []string {
		s.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
		return []string{filepath.Join(bindir, "postgres"), "-D", data, "-p", strconv.Itoa(port),
			"-k", s.dir, "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200",
			"-c", "shared_buffers=32MB", "-c", "logging_collector=off"}
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// StartMariaDB returns the database named by LOCKER_MYSQL_DSN, or starts a
// MariaDB server (see the package documentation) with an empty database
// "locker". The caller must call Close.
func StartMariaDB() (*Server, error) {
	if dsn := os.Getenv(EnvMySQLDSN); dsn != "" {
		return external("mysql", "mysql", dsn)
	}
	mysqld, err1 := exec.LookPath("mariadbd")
	install, err2 := exec.LookPath("mariadb-install-db")
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("%w: mariadbd or mariadb-install-db not in PATH (apt-get install mariadb-server, or set %s): %v",
			ErrNotInstalled, EnvMySQLDSN, err)
	}
	s := &Server{Driver: "mysql", name: "mariadb"}
	if err := s.mkdir("locker-mariadb-"); err != nil {
		return nil, err
	}
	data := filepath.Join(s.dir, "data")
	u := "root"
	if os.Geteuid() != 0 {
		cur, err := user.Current()
		if err != nil {
			s.removeDir()
			return nil, fmt.Errorf("sqltest: %w", err)
		}
		u = cur.Username
	}
	// A temp dir of its own: mariadbd deletes every #sql file in its
	// tmpdir when it starts, so servers sharing /tmp delete each other's
	// temporary tables (mariadb-install-db failed with "Error on delete of
	// '/tmp/#sql-temptable-…'" when two packages' tests started MariaDB
	// at once). mariadb-install-db passes the option on to mariadbd.
	tmp := filepath.Join(s.dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		s.removeDir()
		return nil, fmt.Errorf("sqltest: %w", err)
	}
	inst := exec.Command(install, "--no-defaults", "--datadir="+data, "--user="+u, "--tmpdir="+tmp,
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve")
	if out, err := inst.CombinedOutput(); err != nil {
		s.removeDir()
		return nil, fmt.Errorf("sqltest: mariadb-install-db: %v\n%s", err, out)
	}
	err := s.startOnFreePort(syscall.SIGTERM, func(port int) []string {
		s.DSN = fmt.Sprintf("root@tcp(127.0.0.1:%d)/", port)
		return []string{mysqld, "--no-defaults", "--datadir=" + data, "--user=" + u, "--tmpdir=" + tmp,
			"--port=" + strconv.Itoa(port), "--bind-address=127.0.0.1",
			"--socket=" + filepath.Join(s.dir, "mysqld.sock"), "--pid-file=" + filepath.Join(s.dir, "mysqld.pid"),
			"--skip-name-resolve", "--innodb-buffer-pool-size=32M", "--max-connections=300",
			"--log-error=" + s.logFile}
	})
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("mysql", s.DSN)
	if err == nil {
		_, err = db.Exec("CREATE DATABASE IF NOT EXISTS locker")
		_ = db.Close()
	}
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("sqltest: create database: %w", err)
	}
	s.DSN += "locker"
	return s, nil
}

// postgresBin returns the directory of the newest installed PostgreSQL's
// initdb and postgres.
func postgresBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgVersion(dirs[i]) > pgVersion(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("%w: no initdb in /usr/lib/postgresql/*/bin or PATH (apt-get install postgresql, or set %s)",
		ErrNotInstalled, EnvPostgresDSN)
}

func pgVersion(bindir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(bindir)))
	return n
}

// mkdir creates the server's temporary directory. As root it creates it
// in the system's temporary directory only if other users can reach it
// (the server may run as another user), and in /tmp otherwise.
func (s *Server) mkdir(prefix string) error {
	parent := os.TempDir()
	if os.Geteuid() == 0 && !reachable(parent) {
		parent = "/tmp"
	}
	dir, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		return fmt.Errorf("sqltest: %w", err)
	}
	s.dir = dir
	s.logFile = filepath.Join(dir, "server.log")
	return nil
}

func (s *Server) removeDir() { _ = os.RemoveAll(s.dir) }

// reachable reports whether every user may traverse dir and its parents.
func reachable(dir string) bool {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for {
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return true
		}
		dir = parent
	}
}

// runAs makes the server's directory belong to the named user and the
// server's processes run as that user.
func (s *Server) runAs(name string) error {
	u, err := user.Lookup(name)
	if err != nil {
		return fmt.Errorf("sqltest: PostgreSQL refuses to run as root and there is no user %q: %w", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(s.dir, uid, gid); err != nil {
		return fmt.Errorf("sqltest: %w", err)
	}
	// The directory is 0700: only its owner, now the postgres user, may
	// enter it; its parent (the system's temporary directory) is open to
	// all.
	s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	return nil
}

// external returns the external server dsn names, once it answers.
func external(drv, name, dsn string) (*Server, error) {
	s := &Server{Driver: drv, DSN: dsn, name: name, srv: proc.NewExternal("sqltest", name)}
	if err := s.waitReady(nil); err != nil {
		return nil, fmt.Errorf("sqltest: external %s: %w", name, err)
	}
	return s, nil
}

// startOnFreePort starts the server with the command line that argv
// returns for a free loopback port, on another port when that one was
// taken meanwhile. Close stops the server with stop.
func (s *Server) startOnFreePort(stop os.Signal, argv func(port int) []string) error {
	err := proc.StartOnFreePort(3, func(port int) error {
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		s.srv = s.newServer(argv(port), stop)
		return s.srv.Start()
	})
	if err != nil {
		s.removeDir()
		return fmt.Errorf("sqltest: starting %s: %w", s.name, err)
	}
	return nil
}

// newServer returns the controller of the server process that runs argv in
// s.dir as s.cred, in a process group of its own (proc.StartGroup):
// PostgreSQL's postmaster forks a backend per connection, and Pause must
// stop them all.
func (s *Server) newServer(argv []string, stop os.Signal) *proc.Server {
	return proc.NewServer(proc.Config{
		Pkg:  "sqltest",
		Addr: s.Addr,
		Dir:  s.dir,
		Stop: stop,
		Launch: func() (*proc.Process, error) {
			log, err := os.OpenFile(s.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o666)
			if err != nil {
				return nil, err
			}
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Dir = s.dir
			cmd.Stdout, cmd.Stderr = log, log
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
			p, err := proc.StartGroup(cmd)
			// The child has its own descriptor of the log.
			_ = log.Close()
			return p, err
		},
		Ready: func(p *proc.Process) error {
			if err := s.waitReady(p.Done()); err != nil {
				return fmt.Errorf("%w; log:\n%s", err, proc.LogTail(s.logFile, 4000))
			}
			return nil
		},
	})
}

// waitReady pings the server until it answers, it exits (exited closed)
// or startTimeout passes.
func (s *Server) waitReady(exited <-chan struct{}) error {
	db, err := sql.Open(s.Driver, s.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	return proc.Poll(s.name, startTimeout, 20*time.Millisecond, exited, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return db.PingContext(ctx)
	})
}

// PID returns the server's process id, or 0 when it is not running or
// external.
func (s *Server) PID() int {
	if s.srv == nil {
		return 0
	}
	return s.srv.PID()
}

// Crash kills the server at once (SIGKILL, every process of it) and waits
// for it to exit. Its committed data stays in its directory for Restart.
func (s *Server) Crash() error {
	if s.srv.PID() == 0 && !s.srv.External() {
		return nil // not running: nothing to kill
	}
	return s.srv.Kill()
}

// Pause stops the server's processes (SIGSTOP to its process group and
// every descendant: PostgreSQL's postmaster and every backend) without
// closing their connections, until Resume.
func (s *Server) Pause() error { return s.srv.Pause() }

// Resume lets a paused server run again (SIGCONT).
func (s *Server) Resume() error { return s.srv.Resume() }

// Restart kills the server if it runs and starts it again on the same port
// and data directory.
func (s *Server) Restart() error {
	// PostgreSQL refuses to start while a killed backend of the old
	// server is still attached to its shared memory (the backends die
	// with the process group, but not all at the same instant): retry.
	deadline := time.Now().Add(startTimeout)
	for {
		err := s.srv.Restart()
		if err == nil || !strings.Contains(err.Error(), "pre-existing shared memory block") || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Close stops the server (a fast shutdown: SIGINT for PostgreSQL, SIGTERM
// for MariaDB, then SIGKILL after 10 seconds) and removes its directory.
// It does nothing to an external server and is safe to call more than
// once.
func (s *Server) Close() error {
	if s.srv == nil {
		return nil // a Server made by hand, to carry a DSN
	}
	return s.srv.Close()
}
