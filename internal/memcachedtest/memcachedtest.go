// Package memcachedtest starts real memcached servers for tests.
//
// [Memcached] returns the external server named by LOCKER_MEMCACHED_ADDR,
// or starts a private memcached on a free loopback port (TCP only, in a
// temporary directory that holds its log) for the duration of a test,
// waits until it answers the version command, and stops it by PID at
// cleanup. When memcached is not installed the test is skipped, or fails
// when LOCKER_REQUIRE_SERVERS=1 ([SkipOrFail]). [Start] is the variant for
// TestMain, where no testing.TB exists: it reports a missing binary as
// [ErrNotInstalled].
//
// Tests that need a process of their own, or flags of their own (such as
// -M with a tiny -m, to fill the server's memory), use [Private]: its
// server can be paused ([Server.Pause], SIGSTOP), resumed
// ([Server.Resume]), killed ([Server.Kill]) and restarted on the same port
// ([Server.Restart]); memcached keeps nothing on disk, so a restart
// starts empty. An external server supports none of the process controls,
// which return an error wrapping errors.ErrUnsupported.
//
// [Do] sends one command line over a fresh connection, without a client
// library.
package memcachedtest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/internal/proc"
)

const (
	// EnvAddr names an external memcached server (host:port) to use
	// instead of starting one.
	EnvAddr = "LOCKER_MEMCACHED_ADDR"
	// EnvRequireServers, set to "1", turns a missing server binary into a
	// test failure instead of a skip (the same variable as package
	// testserver).
	EnvRequireServers = proc.EnvRequireServers
)

// ErrNotInstalled is returned by Start when no memcached binary is in PATH
// and LOCKER_MEMCACHED_ADDR is not set.
var ErrNotInstalled = errors.New("memcached not installed; install it (apt-get install memcached) or set " +
	EnvAddr + "; set " + EnvRequireServers + "=1 to make this a failure")

// startTimeout bounds how long a server may take to answer.
const startTimeout = 15 * time.Second

// Server is a memcached server used by a test.
//
// Its process controls (PID, Pause, Resume, Kill, Restart, Close) are
// those of [proc.Server]. Kill and Restart lose every item: memcached
// keeps nothing on disk.
type Server struct {
	// Addr is the server's host:port.
	Addr string

	*proc.Server

	dir string // temporary directory; removed by Close
}

// Memcached returns a memcached server for tb and registers its shutdown
// with tb.Cleanup. It skips tb when memcached is missing (see SkipOrFail)
// and fails tb when the server cannot be started.
func Memcached(tb testing.TB) *Server {
	tb.Helper()
	return proc.ForTest(tb, "memcachedtest", Start, ErrNotInstalled)
}

// Private is Memcached for a test that needs a server process of its own,
// to pause, kill or restart it, or started with extra flags (appended to
// the defaults, so that a later -m or -M wins). It skips tb when
// LOCKER_MEMCACHED_ADDR is set, since the test could not control that
// server.
func Private(tb testing.TB, extra ...string) *Server {
	tb.Helper()
	if os.Getenv(EnvAddr) != "" {
		tb.Skip("memcachedtest: " + EnvAddr + " is set; this test needs a private server")
	}
	return proc.ForTest(tb, "memcachedtest", func() (*Server, error) { return StartPrivate(extra...) }, ErrNotInstalled)
}

// SkipOrFail ends tb because of err from Start: it skips tb when err is
// ErrNotInstalled and LOCKER_REQUIRE_SERVERS is not "1", and fails it
// otherwise.
func SkipOrFail(tb testing.TB, err error) {
	tb.Helper()
	proc.SkipOrFail(tb, "memcachedtest", err, ErrNotInstalled)
}

// Required reports whether LOCKER_REQUIRE_SERVERS=1, for TestMain functions
// that decide themselves what to do with ErrNotInstalled.
func Required() bool { return proc.Required() }

// Start returns the external server named by LOCKER_MEMCACHED_ADDR, or
// starts memcached on a free loopback port. The caller must call Close. It
// returns an error wrapping ErrNotInstalled when neither is available.
func Start() (*Server, error) {
	if addr := os.Getenv(EnvAddr); addr != "" {
		s := &Server{Addr: addr, Server: proc.NewExternal("memcachedtest", addr)}
		if err := waitVersion(addr, startTimeout, nil); err != nil {
			return nil, fmt.Errorf("memcachedtest: external memcached %s (%s): %w", addr, EnvAddr, err)
		}
		return s, nil
	}
	return StartPrivate()
}

// StartPrivate is Private for TestMain: it starts memcached, with extra
// flags after the defaults, whether or not LOCKER_MEMCACHED_ADDR is set.
func StartPrivate(extra ...string) (*Server, error) {
	bin, err := exec.LookPath("memcached")
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrNotInstalled, err)
	}
	dir, err := os.MkdirTemp("", "locker-memcached-")
	if err != nil {
		return nil, fmt.Errorf("memcachedtest: %w", err)
	}
	var s *Server
	err = proc.StartOnFreePort(5, func(port int) error {
		args := []string{
			"-l", "127.0.0.1",
			"-p", strconv.Itoa(port),
			"-U", "0", // no UDP
			"-t", "2",
			"-m", "64",
			"-c", "1024",
		}
		if os.Geteuid() == 0 {
			// memcached refuses to run as root unless told which user
			// to be.
			name := "root"
			if u, err := user.Current(); err == nil {
				name = u.Username
			}
			args = append(args, "-u", name)
		}
		args = append(args, extra...)
		s = newServer(bin, slices.Clip(args), dir, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		return s.Start()
	})
	if err == nil {
		return s, nil
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("memcachedtest: starting memcached: %w", err)
}

// newServer returns the (not yet started) server that runs bin with args
// in dir and listens on addr. Its output goes to memcached.log in dir.
func newServer(bin string, args []string, dir, addr string) *Server {
	s := &Server{Addr: addr, dir: dir}
	logPath := filepath.Join(dir, "memcached.log")
	s.Server = proc.NewServer(proc.Config{
		Pkg:  "memcachedtest",
		Addr: addr,
		Dir:  dir,
		Launch: func() (*proc.Process, error) {
			log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
			if err != nil {
				return nil, err
			}
			cmd := exec.Command(bin, args...)
			cmd.Dir = dir
			cmd.Stdout, cmd.Stderr = log, log
			p, err := proc.Start(cmd)
			// The child has its own descriptor of the log.
			_ = log.Close()
			return p, err
		},
		Ready: func(p *proc.Process) error {
			if err := waitVersion(addr, startTimeout, p.Done()); err != nil {
				return fmt.Errorf("%w; log:\n%s", err, proc.LogTail(logPath, 4000))
			}
			return nil
		},
	})
	return s
}

// waitVersion polls addr until it answers the version command, the timeout
// passes, or exited is closed.
func waitVersion(addr string, timeout time.Duration, exited <-chan struct{}) error {
	return proc.Poll("memcached "+addr, timeout, 10*time.Millisecond, exited, func() error {
		reply, err := do(addr, time.Second, "version")
		if err != nil {
			return err
		}
		if !strings.HasPrefix(reply, "VERSION ") {
			return fmt.Errorf("version answered %q", reply)
		}
		return nil
	})
}

// Do sends one command line (without its CRLF) to addr over a fresh
// connection and returns the reply without its final CRLF: one line for
// most commands, and every line up to and including END for get, gets
// and stats. It is meant for administrative commands in tests (delete,
// flush_all, stats), not as a client; a storage command's data block
// cannot be sent. A reply starting with ERROR, CLIENT_ERROR or
// SERVER_ERROR is returned as an error.
func Do(addr, line string) (string, error) {
	return do(addr, 5*time.Second, line)
}

func do(addr string, timeout time.Duration, line string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte(line + "\r\n")); err != nil {
		return "", err
	}
	multi := false
	switch verb, _, _ := strings.Cut(line, " "); verb {
	case "get", "gets", "stats":
		multi = true
	}
	r := bufio.NewReader(c)
	var lines []string
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			return "", err
		}
		l = strings.TrimRight(l, "\r\n")
		for _, p := range []string{"ERROR", "CLIENT_ERROR", "SERVER_ERROR"} {
			if l == p || strings.HasPrefix(l, p+" ") {
				return "", fmt.Errorf("memcached: %s", l)
			}
		}
		lines = append(lines, l)
		if !multi || l == "END" {
			return strings.Join(lines, "\n"), nil
		}
	}
}

// Stat returns the value of one statistic of the server at addr (the stats
// command's "STAT name value" line), such as "curr_items" or
// "evictions".
func Stat(addr, name string) (string, error) {
	reply, err := Do(addr, "stats")
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(reply, "\n") {
		if v, ok := strings.CutPrefix(l, "STAT "+name+" "); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("memcachedtest: no statistic %q", name)
}
