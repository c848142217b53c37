// Package testserver starts real database servers for tests.
//
// [Redis] returns the external Redis server named by LOCKER_REDIS_ADDR, or
// starts a private redis-server on a free loopback port (no persistence,
// in a temporary directory) for the duration of a test, waits until it
// answers PING and stops it by PID at cleanup. When redis-server is not
// installed the test is skipped, or fails when LOCKER_REQUIRE_SERVERS=1
// ([SkipOrFail]). [StartRedis] is the variant for TestMain, where no
// testing.TB exists: it reports a missing binary as [ErrNotInstalled].
//
// Tests that need a process of their own use [PrivateRedis]: its server
// can be paused ([Server.Pause], SIGSTOP), resumed ([Server.Resume]),
// killed ([Server.Kill]) and restarted on the same port with an empty data
// set ([Server.Restart]). [Replica], [Sentinel] and [RedisCluster] start a
// replica of a server, a Redis Sentinel that monitors one (and can fail it
// over to a replica), and a one-node Redis Cluster; [RedisClusterHA] starts
// a Redis Cluster of several masters with a replica each, which fails a
// killed master over to its replica. They always start processes, and the
// clusters skip when LOCKER_REDIS_ADDR is set. An
// external server supports none of the process controls, which return an
// error wrapping errors.ErrUnsupported.
//
// [Do] sends one administrative command over a fresh connection, without a
// client library.
package testserver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/internal/proc"
)

const (
	// EnvRedisAddr names an external Redis server (host:port) to use
	// instead of starting one.
	EnvRedisAddr = "LOCKER_REDIS_ADDR"
	// EnvRequireServers, set to "1", turns a missing server binary into a
	// test failure instead of a skip.
	EnvRequireServers = proc.EnvRequireServers
)

// ErrNotInstalled is returned by StartRedis when no redis-server binary is
// in PATH and LOCKER_REDIS_ADDR is not set.
var ErrNotInstalled = errors.New("redis-server not installed; install it (apt-get install redis-server) or set " +
	EnvRedisAddr + "; set " + EnvRequireServers + "=1 to make this a failure")

// startTimeout bounds how long a server may take to answer PING.
const startTimeout = 15 * time.Second

// Server is a Redis server used by a test.
//
// Its process controls (PID, Pause, Resume, Kill, Restart, Close) are
// those of [proc.Server]. Kill and Restart lose the data set: the servers
// keep nothing on disk, except that a cluster node keeps its identity and
// slots in nodes.conf, so that a restarted node serves the same slots.
type Server struct {
	// Addr is the server's host:port.
	Addr string

	*proc.Server

	dir string // temporary directory; removed by Close
}

// Redis returns a Redis server for tb and registers its shutdown with
// tb.Cleanup. It skips tb when redis-server is missing (see SkipOrFail) and
// fails tb when the server cannot be started.
func Redis(tb testing.TB) *Server {
	tb.Helper()
	return forTest(tb, StartRedis)
}

// PrivateRedis is Redis for a test that needs a server process of its own,
// to pause, kill or restart it. It skips tb when LOCKER_REDIS_ADDR is set,
// since the test could not control that server.
func PrivateRedis(tb testing.TB) *Server {
	tb.Helper()
	if os.Getenv(EnvRedisAddr) != "" {
		tb.Skip("testserver: " + EnvRedisAddr + " is set; this test needs a private server")
	}
	return forTest(tb, StartPrivateRedis)
}

// StartPrivateRedis is PrivateRedis for TestMain: it starts redis-server
// whether or not LOCKER_REDIS_ADDR is set.
func StartPrivateRedis() (*Server, error) { return startPrivate(nil, nil) }

// RedisCluster is Redis for a one-node Redis Cluster that serves all 16384
// hash slots. Cluster mode makes the server enforce the rules of a real
// cluster, such as CROSSSLOT, which a standalone server does not. It skips
// tb when LOCKER_REDIS_ADDR is set, since an external server cannot be
// switched to cluster mode.
func RedisCluster(tb testing.TB) *Server {
	tb.Helper()
	if os.Getenv(EnvRedisAddr) != "" {
		tb.Skip("testserver: " + EnvRedisAddr + " is set; a cluster needs a private server")
	}
	return forTest(tb, StartRedisCluster)
}

// forTest starts a server for tb: it skips or fails tb when start fails
// (see SkipOrFail), and stops the server at tb's cleanup.
func forTest(tb testing.TB, start func() (*Server, error)) *Server {
	tb.Helper()
	return proc.ForTest(tb, "testserver", start, ErrNotInstalled)
}

// SkipOrFail ends tb because of err from StartRedis: it skips tb when err
// is ErrNotInstalled and LOCKER_REQUIRE_SERVERS is not "1", and fails it
// otherwise.
func SkipOrFail(tb testing.TB, err error) {
	tb.Helper()
	proc.SkipOrFail(tb, "testserver", err, ErrNotInstalled)
}

// Required reports whether LOCKER_REQUIRE_SERVERS=1, for TestMain functions
// that decide themselves what to do with ErrNotInstalled.
func Required() bool { return proc.Required() }

// StartRedis returns the external server named by LOCKER_REDIS_ADDR, or
// starts redis-server on a free loopback port. The caller must call Close.
// It returns an error wrapping ErrNotInstalled when neither is available.
func StartRedis() (*Server, error) {
	if addr := os.Getenv(EnvRedisAddr); addr != "" {
		s := &Server{Addr: addr, Server: proc.NewExternal("testserver", addr)}
		if err := waitPing(addr, startTimeout, nil); err != nil {
			return nil, fmt.Errorf("external redis %s (%s): %w", addr, EnvRedisAddr, err)
		}
		return s, nil
	}
	return startPrivate(nil, nil)
}

// StartRedisCluster is StartRedis for a private one-node cluster (see
// RedisCluster). It ignores LOCKER_REDIS_ADDR.
func StartRedisCluster() (*Server, error) {
	s, err := startPrivate(nil, []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "5000"})
	if err != nil {
		return nil, err
	}
	if err := s.initCluster(); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// Replica is Redis for a replica of master (a server from Redis or
// StartRedis). It skips tb like Redis.
func Replica(tb testing.TB, master *Server) *Server {
	tb.Helper()
	return forTest(tb, func() (*Server, error) { return StartReplica(master) })
}

// StartReplica is Replica for TestMain. It returns once the replica has
// started; it may still be synchronising with master.
func StartReplica(master *Server) (*Server, error) {
	host, port, err := net.SplitHostPort(master.Addr)
	if err != nil {
		return nil, fmt.Errorf("testserver: master address: %w", err)
	}
	return startPrivate(nil, []string{"--replicaof", host, port})
}

// SentinelMaster is the name under which a sentinel started by
// StartSentinel monitors its master.
const SentinelMaster = "locker"

// Sentinel is Redis for a Redis Sentinel that monitors master (a server
// from Redis or StartRedis) as SentinelMaster, with a quorum of 1 and a
// down-after of one second, so that one sentinel can fail master over to a
// replica. It skips tb like Redis.
func Sentinel(tb testing.TB, master *Server) *Server {
	tb.Helper()
	return forTest(tb, func() (*Server, error) { return StartSentinel(master) })
}

// StartSentinel is Sentinel for TestMain. It ignores LOCKER_REDIS_ADDR
// except through master.
func StartSentinel(master *Server) (*Server, error) {
	host, port, err := net.SplitHostPort(master.Addr)
	if err != nil {
		return nil, fmt.Errorf("testserver: master address: %w", err)
	}
	s, err := startPrivate([]string{"sentinel.conf", "--sentinel"}, nil)
	if err != nil {
		return nil, err
	}
	for _, cmd := range [][]string{
		{"SENTINEL", "MONITOR", SentinelMaster, host, port, "1"},
		{"SENTINEL", "SET", SentinelMaster, "down-after-milliseconds", "1000"},
		{"SENTINEL", "SET", SentinelMaster, "failover-timeout", "5000"},
	} {
		if _, err := Do(s.Addr, cmd...); err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("testserver: %s: %w", strings.Join(cmd, " "), err)
		}
	}
	return s, nil
}

// WaitSentinelReplicas waits, at most for timeout, until sentinel (a server
// from Sentinel) knows of at least n replicas of SentinelMaster: Sentinel
// learns of them from the master's INFO, every ten seconds, and cannot
// fail over before it knows one.
func WaitSentinelReplicas(sentinel *Server, n int, timeout time.Duration) error {
	return proc.Poll("sentinel replicas", timeout, 50*time.Millisecond, nil, func() error {
		// The reply is an array with one entry per replica; Do returns its
		// first line, "*<count>".
		reply, err := Do(sentinel.Addr, "SENTINEL", "REPLICAS", SentinelMaster)
		if err != nil {
			return err
		}
		if got, err := strconv.Atoi(reply); err != nil || got < n {
			return fmt.Errorf("sentinel knows %q replicas, want %d", reply, n)
		}
		return nil
	})
}

// startPrivate starts redis-server with pre (a config file name, relative
// to the server's directory, where it is created empty, and mode flags),
// the common options, and extra.
func startPrivate(pre, extra []string) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrNotInstalled, err)
	}
	dir, err := os.MkdirTemp("", "locker-redis-")
	if err != nil {
		return nil, fmt.Errorf("testserver: %w", err)
	}
	if len(pre) > 0 && strings.HasSuffix(pre[0], ".conf") {
		conf := filepath.Join(dir, pre[0])
		if err := os.WriteFile(conf, nil, 0o600); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("testserver: %w", err)
		}
		pre = append([]string{conf}, pre[1:]...)
	}
	var s *Server
	err = proc.StartOnFreePort(5, func(port int) error {
		args := append(append(slices.Clip(pre),
			"--port", strconv.Itoa(port),
			"--bind", "127.0.0.1",
			"--save", "",
			"--appendonly", "no",
			"--daemonize", "no",
			"--dir", dir,
			"--logfile", "redis.log",
			"--databases", "16",
			// A replica's first sync starts at once, not after the
			// default 5s wait for other replicas.
			"--repl-diskless-sync-delay", "0",
		), extra...)
		s = newServer(bin, args, dir, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		return s.Start()
	})
	if err == nil {
		return s, nil
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("testserver: starting redis-server: %w", err)
}

// newServer returns the (not yet started) server that runs bin with args
// in dir and listens on addr.
func newServer(bin string, args []string, dir, addr string) *Server {
	s := &Server{Addr: addr, dir: dir}
	s.Server = proc.NewServer(proc.Config{
		Pkg:  "testserver",
		Addr: addr,
		Dir:  dir,
		Launch: func() (*proc.Process, error) {
			cmd := exec.Command(bin, args...)
			cmd.Dir = dir
			return proc.Start(cmd)
		},
		Ready: func(p *proc.Process) error {
			if err := waitPing(addr, startTimeout, p.Done()); err != nil {
				return fmt.Errorf("%w; log:\n%s", err, s.logTail())
			}
			return nil
		},
	})
	return s
}

// logTail returns the end of the server's log file.
func (s *Server) logTail() string { return proc.LogTail(filepath.Join(s.dir, "redis.log"), 4000) }

// waitPing polls addr until it answers PING with PONG, the timeout passes,
// or exited is closed.
func waitPing(addr string, timeout time.Duration, exited <-chan struct{}) error {
	return proc.Poll("redis-server "+addr, timeout, 10*time.Millisecond, exited, func() error { return ping(addr) })
}

// ping sends one PING over a fresh connection.
func ping(addr string) error {
	reply, err := do(addr, time.Second, "PING")
	if err != nil {
		return err
	}
	if reply != "PONG" {
		return fmt.Errorf("PING answered %q", reply)
	}
	return nil
}

// Do sends one command to addr over a fresh connection and returns the
// first line of the reply without its type byte (for a bulk string, the
// string). It is meant for administrative commands in tests, not as a
// client; an error reply is returned as an error.
func Do(addr string, args ...string) (string, error) {
	return do(addr, 5*time.Second, args...)
}

func do(addr string, timeout time.Duration, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '-':
		return "", fmt.Errorf("redis: %s", line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return line[1:], nil
}

// initCluster assigns every slot to the single node and waits until the
// cluster reports state ok.
func (s *Server) initCluster() error {
	if _, err := Do(s.Addr, "CLUSTER", "ADDSLOTSRANGE", "0", "16383"); err != nil {
		return fmt.Errorf("testserver: CLUSTER ADDSLOTSRANGE: %w", err)
	}
	deadline := time.Now().Add(startTimeout)
	for {
		info, err := Do(s.Addr, "CLUSTER", "INFO")
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("testserver: cluster not ok within %v: %v %q", startTimeout, err, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Cluster is a Redis Cluster of private redis-server processes on
// loopback: masters that share the 16384 hash slots, each with one
// replica, so that killing a master fails its slots over to its replica.
type Cluster struct {
	// Masters are the masters at the start, in slot order: Masters[i]
	// serves the i-th of len(Masters) equal ranges of slots.
	Masters []*Server
	// Replicas[i] replicates Masters[i].
	Replicas []*Server

	bus map[string]int // cluster bus port by node address
}

// NodeTimeout is the cluster-node-timeout of a Cluster: a master that
// stops answering for this long is failed over to its replica (which
// takes about two to four times as long in all).
const NodeTimeout = time.Second

// Addrs returns the addresses of every node, masters first.
func (c *Cluster) Addrs() []string {
	var a []string
	for _, s := range append(slices.Clip(c.Masters), c.Replicas...) {
		a = append(a, s.Addr)
	}
	return a
}

// Close stops every node.
func (c *Cluster) Close() error {
	var errs []error
	for _, s := range append(slices.Clip(c.Masters), c.Replicas...) {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// RedisClusterHA is Redis for a Cluster of masters masters with one replica
// each (2*masters processes). It skips tb like RedisCluster.
func RedisClusterHA(tb testing.TB, masters int) *Cluster {
	tb.Helper()
	if os.Getenv(EnvRedisAddr) != "" {
		tb.Skip("testserver: " + EnvRedisAddr + " is set; a cluster needs private servers")
	}
	c, err := StartRedisClusterHA(masters)
	if err != nil {
		SkipOrFail(tb, err)
	}
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Error(err)
		}
	})
	return c
}

// StartRedisClusterHA is RedisClusterHA for TestMain. It returns once every
// node reports cluster_state:ok and every master has its replica online.
func StartRedisClusterHA(masters int) (*Cluster, error) {
	if masters < 1 {
		return nil, errors.New("testserver: a cluster needs a master")
	}
	c := &Cluster{}
	if err := c.start(masters); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(masters int) error {
	c.bus = make(map[string]int)
	for i := range 2 * masters {
		s, bus, err := startClusterNode()
		if err != nil {
			return err
		}
		c.bus[s.Addr] = bus
		if i < masters {
			c.Masters = append(c.Masters, s)
		} else {
			c.Replicas = append(c.Replicas, s)
		}
	}
	for i, m := range c.Masters {
		lo, hi := i*16384/masters, (i+1)*16384/masters-1
		if _, err := Do(m.Addr, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil {
			return fmt.Errorf("testserver: CLUSTER ADDSLOTSRANGE: %w", err)
		}
	}
	first := c.Masters[0].Addr
	host, port, _ := net.SplitHostPort(first)
	for _, s := range c.Addrs()[1:] {
		if _, err := Do(s, "CLUSTER", "MEET", host, port, strconv.Itoa(c.bus[first])); err != nil {
			return fmt.Errorf("testserver: CLUSTER MEET: %w", err)
		}
	}
	for i, r := range c.Replicas {
		id, err := Do(c.Masters[i].Addr, "CLUSTER", "MYID")
		if err != nil {
			return fmt.Errorf("testserver: CLUSTER MYID: %w", err)
		}
		// The replica must know the master before it can replicate it.
		if err := proc.Poll("cluster replica "+r.Addr, startTimeout, 20*time.Millisecond, nil, func() error {
			_, err := Do(r.Addr, "CLUSTER", "REPLICATE", id)
			return err
		}); err != nil {
			return err
		}
	}
	for _, a := range c.Addrs() {
		if err := proc.Poll("cluster node "+a, startTimeout, 20*time.Millisecond, nil, func() error {
			info, err := Do(a, "CLUSTER", "INFO")
			if err != nil {
				return err
			}
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(2*masters)+"\r") {
				return fmt.Errorf("not ok yet: %q", info)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	for _, m := range c.Masters {
		if err := proc.Poll("cluster master "+m.Addr, startTimeout, 20*time.Millisecond, nil, func() error {
			info, err := Do(m.Addr, "INFO", "replication")
			if err != nil {
				return err
			}
			if !strings.Contains(info, ",state=online,") {
				return errors.New("replica not online yet")
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// startClusterNode starts one redis-server in cluster mode, with a cluster
// bus port of its own (the default, port+10000, may be out of range), and
// returns it and its bus port.
func startClusterNode() (*Server, int, error) {
	bus, err := proc.FreePorts(1)
	if err != nil {
		return nil, 0, fmt.Errorf("testserver: %w", err)
	}
	s, err := startPrivate(nil, []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", strconv.Itoa(int(NodeTimeout / time.Millisecond)),
		"--cluster-port", strconv.Itoa(bus[0])})
	return s, bus[0], err
}
