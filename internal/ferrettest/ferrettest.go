// Package ferrettest starts FerretDB servers for tests: a MongoDB
// wire-protocol server written in Go, over SQLite, built from the
// unpublished module servers/ferretdb by [proc.GoBinary], so that none of
// its dependencies reach a published go.mod.
//
// [Start] returns the external server named by LOCKER_MONGODB_URI (a real
// MongoDB, say), or builds FerretDB (the first build on a machine takes a
// minute or two; later runs find the binary in the user's cache) and
// starts it on a free loopback port with a temporary data directory. The
// server keeps its documents on disk: [Server.Restart] kills it and starts
// it again on the same port and directory, where it finds them. When no
// go command or module proxy is available the tests skip, or fail when
// LOCKER_REQUIRE_SERVERS=1 ([SkipOrFail]).
package ferrettest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/go-locker/locker/internal/proc"
)

// EnvURI names an external MongoDB-compatible server (a mongodb:// URI) to
// use instead of starting FerretDB.
const EnvURI = "LOCKER_MONGODB_URI"

// startTimeout bounds how long a server may take to listen.
const startTimeout = 30 * time.Second

// Server is a FerretDB server used by a test. Its process controls (PID,
// Pause, Resume, Kill, Restart, Close) are those of [proc.Server]; an
// external server supports none of them.
type Server struct {
	// Addr is the server's host:port ("" for an external server).
	Addr string
	// URI is the connection string of the server.
	URI string
	// Dir is the data directory ("" for an external server).
	Dir string

	*proc.Server
}

// FerretDB returns a server for tb and registers its shutdown with
// tb.Cleanup. It skips tb when FerretDB cannot be built (see SkipOrFail).
func FerretDB(tb testing.TB) *Server {
	tb.Helper()
	return proc.ForTest(tb, "ferrettest", Start, proc.ErrNoGoServer)
}

// Private is FerretDB for a test that needs a server process of its own,
// to pause, kill or restart it. It skips tb when LOCKER_MONGODB_URI is
// set, since the test could not control that server.
func Private(tb testing.TB) *Server {
	tb.Helper()
	if os.Getenv(EnvURI) != "" {
		tb.Skip("ferrettest: " + EnvURI + " is set; this test needs a private server")
	}
	return proc.ForTest(tb, "ferrettest", StartPrivate, proc.ErrNoGoServer)
}

// SkipOrFail ends tb because of err from Start: it skips tb when FerretDB
// cannot be built and LOCKER_REQUIRE_SERVERS is not "1", and fails it
// otherwise.
func SkipOrFail(tb testing.TB, err error) {
	tb.Helper()
	proc.SkipOrFail(tb, "ferrettest", err, proc.ErrNoGoServer)
}

// Start returns the external server named by LOCKER_MONGODB_URI, or
// starts FerretDB. The caller must call Close.
func Start() (*Server, error) {
	if uri := os.Getenv(EnvURI); uri != "" {
		return &Server{URI: uri, Server: proc.NewExternal("ferrettest", uri)}, nil
	}
	return StartPrivate()
}

// StartPrivate is Private for TestMain: it starts FerretDB whether or not
// LOCKER_MONGODB_URI is set.
func StartPrivate() (*Server, error) {
	bin, err := proc.GoBinary("ferretdb")
	if err != nil {
		return nil, fmt.Errorf("ferrettest: %w (or set %s to use another server)", err, EnvURI)
	}
	dir, err := os.MkdirTemp("", "locker-ferretdb-")
	if err != nil {
		return nil, fmt.Errorf("ferrettest: %w", err)
	}
	var s *Server
	err = proc.StartOnFreePort(5, func(port int) error {
		s = newServer(bin, dir, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		return s.Start()
	})
	if err == nil {
		return s, nil
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("ferrettest: starting FerretDB: %w", err)
}

// newServer returns the (not yet started) server that runs bin on addr
// with its data in dir/data and its log in dir/ferretdb.log.
func newServer(bin, dir, addr string) *Server {
	data := filepath.Join(dir, "data")
	s := &Server{Addr: addr, URI: "mongodb://" + addr + "/", Dir: data}
	logPath := filepath.Join(dir, "ferretdb.log")
	s.Server = proc.NewServer(proc.Config{
		Pkg:  "ferrettest",
		Addr: addr,
		Dir:  dir,
		Stop: syscall.SIGTERM,
		Launch: func() (*proc.Process, error) {
			log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
			if err != nil {
				return nil, err
			}
			cmd := exec.Command(bin, "-listen", addr, "-dir", data)
			cmd.Dir = dir
			cmd.Stdout, cmd.Stderr = log, log
			p, err := proc.Start(cmd)
			_ = log.Close() // the child has its own descriptor
			return p, err
		},
		Ready: func(p *proc.Process) error {
			err := proc.Poll("ferretdb "+addr, startTimeout, 20*time.Millisecond, p.Done(), func() error {
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err == nil {
					_ = c.Close()
				}
				return err
			})
			if err != nil {
				return fmt.Errorf("%w; log:\n%s", err, proc.LogTail(logPath, 4000))
			}
			return nil
		},
	})
	return s
}
