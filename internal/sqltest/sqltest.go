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
// go-sql-driver/mysql ("mysql"), and stop it by PID in [Server.Close].
// [Server.Crash] kills the server (SIGKILL) and [Server.Restart] starts it
// again on the same port and data directory, as after a crash: committed
// data survives. [Server.Pause] and [Server.Resume] stop and continue it
// (SIGSTOP, SIGCONT), with every process of PostgreSQL's.
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
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // database/sql driver "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

const (
	// EnvPostgresDSN names an external PostgreSQL database (a pgx DSN) to
	// use instead of starting a server.
	EnvPostgresDSN = "LOCKER_POSTGRES_DSN"
	// EnvMySQLDSN names an external MySQL or MariaDB database (a
	// go-sql-driver/mysql DSN) to use instead of starting a server.
	EnvMySQLDSN = "LOCKER_MYSQL_DSN"
	// EnvRequireServers, set to "1", turns missing server binaries into a
	// test failure instead of a skip.
	EnvRequireServers = "LOCKER_REQUIRE_SERVERS"
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

	name     string // "postgres" or "mariadb", for messages
	external bool
	dir      string   // temporary directory, removed by Close
	argv     []string // the server's command line
	cred     *syscall.Credential
	logFile  string

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed when cmd has exited
	closed bool
}

// SkipOrFail ends tb because of err from StartPostgres or StartMariaDB:
// it skips tb when the binaries are missing and LOCKER_REQUIRE_SERVERS is
// not "1", and fails it otherwise.
func SkipOrFail(tb testing.TB, err error) {
	tb.Helper()
	if errors.Is(err, ErrNotInstalled) && !Required() {
		tb.Skip(err.Error())
	}
	tb.Fatalf("sqltest: %v", err)
}

// Required reports whether LOCKER_REQUIRE_SERVERS=1.
func Required() bool { return os.Getenv(EnvRequireServers) == "1" }

// External reports whether the server is one named by an environment
// variable, which the tests do not control.
func (s *Server) External() bool { return s.external }

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
		s := &Server{Driver: "pgx", DSN: dsn, name: "postgres", external: true}
		return s, s.waitReady(nil)
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
	initdb.SysProcAttr = procAttr(s.cred)
	initdb.Dir = s.dir // the postgres user may not enter the test's directory
	if out, err := initdb.CombinedOutput(); err != nil {
		s.removeDir()
		return nil, fmt.Errorf("sqltest: initdb: %v\n%s", err, out)
	}
	return s, s.startOnFreePort(func(port int) {
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		s.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
		s.argv = []string{filepath.Join(bindir, "postgres"), "-D", data, "-p", strconv.Itoa(port),
			"-k", s.dir, "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200",
			"-c", "shared_buffers=32MB", "-c", "logging_collector=off"}
	})
}

// StartMariaDB returns the database named by LOCKER_MYSQL_DSN, or starts a
// MariaDB server (see the package documentation) with an empty database
// "locker". The caller must call Close.
func StartMariaDB() (*Server, error) {
	if dsn := os.Getenv(EnvMySQLDSN); dsn != "" {
		s := &Server{Driver: "mysql", DSN: dsn, name: "mysql", external: true}
		return s, s.waitReady(nil)
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
	inst := exec.Command(install, "--no-defaults", "--datadir="+data, "--user="+u,
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve")
	if out, err := inst.CombinedOutput(); err != nil {
		s.removeDir()
		return nil, fmt.Errorf("sqltest: mariadb-install-db: %v\n%s", err, out)
	}
	err := s.startOnFreePort(func(port int) {
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		s.DSN = fmt.Sprintf("root@tcp(%s)/", s.Addr)
		s.argv = []string{mysqld, "--no-defaults", "--datadir=" + data, "--user=" + u,
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

// startOnFreePort starts the server on a free port, set by configure,
// trying again on another port when the first was taken in the meantime.
func (s *Server) startOnFreePort(configure func(port int)) error {
	var err error
	for range 3 {
		var port int
		port, err = freePort()
		if err != nil {
			continue
		}
		configure(port)
		if err = s.start(); err == nil {
			return nil
		}
	}
	s.removeDir()
	return fmt.Errorf("sqltest: starting %s: %w", s.name, err)
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs the server and waits until it accepts connections.
func (s *Server) start() error {
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = procAttr(s.cred)
	log, err := os.OpenFile(s.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o666)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = log, log
	err = cmd.Start()
	_ = log.Close()
	if err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	if err := s.waitReady(done); err != nil {
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("%w; log:\n%s", err, s.logTail())
	}
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	return nil
}

// waitReady pings the server until it answers, it exits (done closed) or
// startTimeout passes.
func (s *Server) waitReady(done <-chan struct{}) error {
	db, err := sql.Open(s.Driver, s.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = db.PingContext(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %v: %w", s.name, startTimeout, err)
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited before accepting connections (%v)", s.name, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// logTail returns the end of the server's log.
func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.logFile)
	const max = 4000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// PID returns the server's process id, or 0 when it is not running or
// external.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Crash kills the server at once (SIGKILL) and waits for it to exit. Its
// committed data stays in its directory for Restart.
func (s *Server) Crash() error {
	if s.external {
		return fmt.Errorf("sqltest: Crash of an external %s server: %w", s.name, errors.ErrUnsupported)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stop(syscall.SIGKILL)
	return nil
}

// Pause stops the server's processes (SIGSTOP to its process group:
// PostgreSQL's postmaster and every backend) without closing their
// connections, until Resume.
func (s *Server) Pause() error { return s.signalGroup("Pause", syscall.SIGSTOP) }

// Resume lets a paused server run again (SIGCONT).
func (s *Server) Resume() error { return s.signalGroup("Resume", syscall.SIGCONT) }

func (s *Server) signalGroup(what string, sig syscall.Signal) error {
	if s.external {
		return fmt.Errorf("sqltest: %s of an external %s server: %w", what, s.name, errors.ErrUnsupported)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return fmt.Errorf("sqltest: %s: %s is not running", what, s.name)
	}
	if err := signalAll(s.cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("sqltest: %s: %w", what, err)
	}
	return nil
}

// signalAll sends sig to the process group of the server pid and to every
// descendant of pid, in groups of their own or not.
func signalAll(pid int, sig syscall.Signal) error {
	err := syscall.Kill(-pid, sig)
	for _, c := range descendants(pid) {
		_ = syscall.Kill(c, sig)
	}
	return err
}

// Restart kills the server if it runs and starts it again on the same port
// and data directory.
func (s *Server) Restart() error {
	if err := s.Crash(); err != nil {
		return err
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return errors.New("sqltest: Restart after Close")
	}
	// The port stays the same: the old process held it until it exited.
	// PostgreSQL refuses to start while a killed backend of the old
	// server is still attached to its shared memory (the backends die
	// with the process group, but not all at the same instant): retry.
	deadline := time.Now().Add(startTimeout)
	for {
		err := s.start()
		if err == nil {
			return nil
		}
		if !strings.Contains(err.Error(), "pre-existing shared memory block") || time.Now().After(deadline) {
			return fmt.Errorf("sqltest: restarting %s: %w", s.name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop sends sig to the running server, if any, and waits for it to exit,
// killing it if it has not within 10 seconds. s.mu is held.
func (s *Server) stop(sig syscall.Signal) {
	if s.cmd == nil {
		return
	}
	_ = signalAll(s.cmd.Process.Pid, syscall.SIGCONT) // a paused server could not stop
	if sig == syscall.SIGKILL {
		// Every process: PostgreSQL's backends too.
		_ = signalAll(s.cmd.Process.Pid, sig)
	} else {
		_ = s.cmd.Process.Signal(sig)
	}
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
	s.cmd, s.done = nil, nil
}

// Close stops the server (a fast shutdown: SIGINT for PostgreSQL, SIGTERM
// for MariaDB) and removes its directory. It does nothing to an external
// server and is safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.external {
		s.closed = true
		return nil
	}
	s.closed = true
	sig := syscall.SIGTERM
	if s.name == "postgres" {
		sig = syscall.SIGINT
	}
	s.stop(sig)
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("sqltest: %w", err)
	}
	return nil
}
