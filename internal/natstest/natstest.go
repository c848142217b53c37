// Package natstest runs real NATS servers (nats-server with JetStream)
// for tests.
//
// The server is the program of the unpublished module servers/nats,
// built once per machine by [proc.GoBinary], so that nats-server's
// dependencies never reach a published go.mod. When it cannot be built
// (no go command, no module proxy), [Start] returns an error wrapping
// [ErrNotInstalled] and tests skip, or fail when LOCKER_REQUIRE_SERVERS=1.
//
// [Start] runs one server on a free loopback port, with JetStream on file
// storage in a temporary directory; [StartCluster] runs n servers that
// form one cluster (JetStream replicated by Raft). Every server can be
// paused (SIGSTOP), resumed, killed (SIGKILL, as a crash) and restarted
// on the same ports and data: the process controls of [proc.Server].
//
// JetStream syncs its files to disk every 2 minutes by default; tests of
// durability after a crash of the machine set [Options.SyncAlways]
// (sync_interval: always), which syncs every write before it is
// acknowledged. A kill of the process alone loses nothing either way: what
// the server wrote is in the operating system's page cache.
package natstest

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/internal/proc"
)

// ErrNotInstalled is wrapped by the error of Start and StartCluster when
// the server program cannot be built here.
var ErrNotInstalled = proc.ErrNoGoServer

// startTimeout bounds how long a server may take to become healthy.
const startTimeout = 60 * time.Second

// Options configures the servers of Start and StartCluster.
type Options struct {
	// SyncAlways makes JetStream sync every write to disk before it
	// acknowledges it (sync_interval: always).
	SyncAlways bool
}

// Server is one nats-server process. Its process controls (PID, Pause,
// Resume, Kill, Restart, Close) are those of proc.Server; Restart keeps
// the JetStream data.
type Server struct {
	// Name is the server's name (server_name), as JetStream's stream
	// info reports a leader.
	Name string
	// Addr is the client address, host:port.
	Addr string
	// URL is the client URL, nats://host:port.
	URL string
	// Monitor is the address of the HTTP monitoring endpoint.
	Monitor string

	*proc.Server
	dir string
}

// Cluster is a set of servers that form one cluster.
type Cluster struct {
	Servers []*Server
}

// ForTest starts a server for tb, closed at tb's cleanup; it skips or
// fails tb as proc.SkipOrFail does when the server cannot be built.
func ForTest(tb testing.TB, o Options) *Server {
	tb.Helper()
	return proc.ForTest(tb, "natstest", func() (*Server, error) { return Start(o) }, ErrNotInstalled)
}

// ClusterForTest starts an n-server cluster for tb, closed at tb's cleanup.
func ClusterForTest(tb testing.TB, n int, o Options) *Cluster {
	tb.Helper()
	return proc.ForTest(tb, "natstest", func() (*Cluster, error) { return StartCluster(n, o) }, ErrNotInstalled)
}

// Start starts one server. The caller must Close it.
func Start(o Options) (*Server, error) {
	c, err := StartCluster(1, o)
	if err != nil {
		return nil, err
	}
	return c.Servers[0], nil
}

// StartCluster starts n servers that form one cluster (no cluster for n
// = 1) and waits until each is healthy. The caller must Close it.
func StartCluster(n int, o Options) (*Cluster, error) {
	bin, err := proc.GoBinary("nats")
	if err != nil {
		return nil, fmt.Errorf("natstest: %w", err)
	}
	var lastErr error
	for range 3 { // another process may take a free port before we bind it
		c, err := startCluster(bin, n, o)
		if err == nil {
			return c, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func startCluster(bin string, n int, o Options) (*Cluster, error) {
	ports, err := proc.FreePorts(3 * n)
	if err != nil {
		return nil, err
	}
	c := &Cluster{}
	for i := range n {
		s, err := newServer(bin, i, ports, n, o)
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		c.Servers = append(c.Servers, s)
		if _, err := s.Launch(); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	for _, s := range c.Servers {
		if err := s.waitHealthy(s.Process()); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	return c, nil
}

// newServer writes the configuration of server i of n, whose client,
// monitoring and cluster ports are ports[3i:3i+3], and returns it, not
// yet launched.
func newServer(bin string, i int, ports []int, n int, o Options) (*Server, error) {
	dir, err := os.MkdirTemp("", "locker-nats-")
	if err != nil {
		return nil, fmt.Errorf("natstest: %w", err)
	}
	s := &Server{
		Name:    "n" + strconv.Itoa(i),
		Addr:    hostPort(ports[3*i]),
		Monitor: hostPort(ports[3*i+1]),
		dir:     dir,
	}
	s.URL = "nats://" + s.Addr
	conf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(conf, []byte(s.config(ports, n, i, o)), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("natstest: %w", err)
	}
	s.Server = proc.NewServer(proc.Config{
		Pkg:  "natstest",
		Addr: s.Addr,
		Dir:  dir,
		Launch: func() (*proc.Process, error) {
			cmd := exec.Command(bin, "-c", conf)
			cmd.Dir = dir
			return proc.Start(cmd)
		},
		Ready: s.waitHealthy,
	})
	return s, nil
}

// config returns the configuration file of server i.
func (s *Server) config(ports []int, n, i int, o Options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "server_name: %s\nlisten: %q\nhttp: %q\n", s.Name, s.Addr, s.Monitor)
	fmt.Fprintf(&b, "log_file: %q\n", filepath.Join(s.dir, "nats.log"))
	fmt.Fprintf(&b, "jetstream {\n  store_dir: %q\n", filepath.Join(s.dir, "js"))
	if o.SyncAlways {
		b.WriteString("  sync_interval: always\n")
	}
	b.WriteString("}\n")
	if n > 1 {
		fmt.Fprintf(&b, "cluster {\n  name: locker\n  listen: %q\n  routes: [\n", hostPort(ports[3*i+2]))
		for j := range n {
			if j != i {
				fmt.Fprintf(&b, "    \"nats-route://%s\"\n", hostPort(ports[3*j+2]))
			}
		}
		b.WriteString("  ]\n}\n")
	}
	return b.String()
}

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// waitHealthy polls the monitoring endpoint's /healthz until it answers
// 200 (JetStream is up and, in a cluster, current), the timeout passes or
// p exits.
func (s *Server) waitHealthy(p *proc.Process) error {
	var exited <-chan struct{}
	if p != nil {
		exited = p.Done()
	}
	client := &http.Client{Timeout: time.Second}
	err := proc.Poll("nats-server "+s.Addr, startTimeout, 20*time.Millisecond, exited, func() error {
		resp, err := client.Get("http://" + s.Monitor + "/healthz")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("healthz: %s", resp.Status)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w; log:\n%s", err, s.LogTail())
	}
	return nil
}

// LogTail returns the end of the server's log file.
func (s *Server) LogTail() string { return proc.LogTail(filepath.Join(s.dir, "nats.log"), 4000) }

// URLs returns the client URLs of the cluster's servers, comma-separated,
// as nats.Connect takes them.
func (c *Cluster) URLs() string {
	urls := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		urls[i] = s.URL
	}
	return strings.Join(urls, ",")
}

// ByName returns the server named name, or nil.
func (c *Cluster) ByName(name string) *Server {
	for _, s := range c.Servers {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// Close closes every server and removes their directories.
func (c *Cluster) Close() error {
	var errs []error
	for _, s := range c.Servers {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}
