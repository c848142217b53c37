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
// over to a replica), and a one-node Redis Cluster; they always start
// processes, and RedisCluster skips when LOCKER_REDIS_ADDR is set. An
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
	"sync"
	"testing"
	"time"
)

const (
	// EnvRedisAddr names an external Redis server (host:port) to use
	// instead of starting one.
	EnvRedisAddr = "LOCKER_REDIS_ADDR"
	// EnvRequireServers, set to "1", turns a missing server binary into a
	// test failure instead of a skip.
	EnvRequireServers = "LOCKER_REQUIRE_SERVERS"
)

// ErrNotInstalled is returned by StartRedis when no redis-server binary is
// in PATH and LOCKER_REDIS_ADDR is not set.
var ErrNotInstalled = errors.New("redis-server not installed; install it (apt-get install redis-server) or set " +
	EnvRedisAddr + "; set " + EnvRequireServers + "=1 to make this a failure")

// startTimeout bounds how long a server may take to answer PING.
const startTimeout = 15 * time.Second

// Server is a Redis server used by a test.
type Server struct {
	// Addr is the server's host:port.
	Addr string

	external bool
	bin      string
	args     []string
	dir      string // temporary directory; removed by Close
	ownDir   bool

	mu      sync.Mutex
	proc    *process // nil when not running
	stopped bool     // Pause was called without Resume
	closed  bool
}

// process is one run of redis-server.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd.Wait has returned
	err  error         // cmd.Wait's result, valid after done
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
	s, err := start()
	if err != nil {
		SkipOrFail(tb, err)
		return nil
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("testserver: %v", err)
		}
	})
	return s
}

// SkipOrFail ends tb because of err from StartRedis: it skips tb when err
// is ErrNotInstalled and LOCKER_REQUIRE_SERVERS is not "1", and fails it
// otherwise.
func SkipOrFail(tb testing.TB, err error) {
	tb.Helper()
	if errors.Is(err, ErrNotInstalled) && os.Getenv(EnvRequireServers) != "1" {
		tb.Skip(err.Error())
	}
	tb.Fatalf("testserver: %v", err)
}

// Required reports whether LOCKER_REQUIRE_SERVERS=1, for TestMain functions
// that decide themselves what to do with ErrNotInstalled.
func Required() bool { return os.Getenv(EnvRequireServers) == "1" }

// StartRedis returns the external server named by LOCKER_REDIS_ADDR, or
// starts redis-server on a free loopback port. The caller must call Close.
// It returns an error wrapping ErrNotInstalled when neither is available.
func StartRedis() (*Server, error) {
	if addr := os.Getenv(EnvRedisAddr); addr != "" {
		s := &Server{Addr: addr, external: true}
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
	s := &Server{bin: bin, dir: dir, ownDir: true}
	if len(pre) > 0 && strings.HasSuffix(pre[0], ".conf") {
		conf := filepath.Join(dir, pre[0])
		if err := os.WriteFile(conf, nil, 0o600); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("testserver: %w", err)
		}
		pre = append([]string{conf}, pre[1:]...)
	}
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			lastErr = err
			continue
		}
		s.args = append(append(slices.Clip(pre),
			"--port", strconv.Itoa(port),
			"--bind", "127.0.0.1",
			"--save", "",
			"--appendonly", "no",
			"--daemonize", "no",
			"--dir", dir,
			"--logfile", "redis.log",
			"--databases", "16",
		), extra...)
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		lastErr = s.start()
		if lastErr == nil {
			return s, nil
		}
		// The port may have been taken between freePort and the bind:
		// try another one.
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("testserver: starting redis-server: %w", lastErr)
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

// start runs the server process and waits for it to answer PING. On error
// the process is gone.
func (s *Server) start() error {
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.dir
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := waitPing(s.Addr, startTimeout, p.done); err != nil {
		_ = cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%w; log:\n%s", err, s.logTail())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed { // Close ran during a Restart
		_ = cmd.Process.Kill()
		<-p.done
		return errors.New("server closed")
	}
	s.proc = p
	s.stopped = false
	return nil
}

// logTail returns the end of the server's log file.
func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	const max = 4000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// waitPing polls addr until it answers PING with PONG, the timeout passes,
// or exited is closed.
func waitPing(addr string, timeout time.Duration, exited <-chan struct{}) error {
	deadline := time.Now().Add(timeout)
	var err error
	for {
		if err = ping(addr); err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server exited before answering PING (%v)", err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no PONG from %s within %v: %w", addr, timeout, err)
		}
	}
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

// PID returns the process id of the private server, or 0 for an external
// server or one that is not running.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// External reports whether the server is the one named by
// LOCKER_REDIS_ADDR, which the test does not control.
func (s *Server) External() bool { return s.external }

func (s *Server) running(op string) (*process, error) {
	if s.external {
		return nil, fmt.Errorf("testserver: %s on external server %s: %w", op, s.Addr, errors.ErrUnsupported)
	}
	if s.proc == nil {
		return nil, fmt.Errorf("testserver: %s: server %s is not running", op, s.Addr)
	}
	return s.proc, nil
}

// Pause stops the server process (SIGSTOP): it keeps its connections and
// data but answers nothing until Resume.
func (s *Server) Pause() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.running("Pause")
	if err != nil {
		return err
	}
	if err := signalStop(p.cmd.Process); err != nil {
		return fmt.Errorf("testserver: Pause: %w", err)
	}
	s.stopped = true
	return nil
}

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.running("Resume")
	if err != nil {
		return err
	}
	if err := signalCont(p.cmd.Process); err != nil {
		return fmt.Errorf("testserver: Resume: %w", err)
	}
	s.stopped = false
	return nil
}

// Kill ends the server process at once (SIGKILL) and waits for it. Its data
// is lost.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.running("Kill"); err != nil {
		return err
	}
	s.kill()
	return nil
}

// kill kills the running process, if any, and waits for it. s.mu is held.
func (s *Server) kill() {
	if s.proc == nil {
		return
	}
	_ = s.proc.cmd.Process.Kill()
	<-s.proc.done
	s.proc = nil
	s.stopped = false
}

// Restart kills the server if it is running and starts it again on the same
// address with an empty data set, as after a crash without persistence.
func (s *Server) Restart() error {
	s.mu.Lock()
	if s.external {
		s.mu.Unlock()
		return fmt.Errorf("testserver: Restart on external server %s: %w", s.Addr, errors.ErrUnsupported)
	}
	if s.closed {
		s.mu.Unlock()
		return errors.New("testserver: Restart after Close")
	}
	s.kill()
	s.mu.Unlock()
	// A cluster node keeps its identity and slots in nodes.conf, which
	// stays in s.dir, so a restarted node serves the same slots.
	if err := s.start(); err != nil {
		return fmt.Errorf("testserver: Restart: %w", err)
	}
	return nil
}

// Close stops a private server and removes its directory. It does nothing
// to an external server. It is safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.kill()
	if s.ownDir {
		if err := os.RemoveAll(s.dir); err != nil {
			return fmt.Errorf("testserver: %w", err)
		}
	}
	return nil
}
