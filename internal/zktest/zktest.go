// Package zktest starts real ZooKeeper servers for tests.
//
// The servers are Debian's zookeeper package (the jars of
// libzookeeper-java): this package runs
// org.apache.zookeeper.server.quorum.QuorumPeerMain with the system's java
// on free loopback ports, each server in a temporary directory of its own,
// waits until it serves requests (the four-letter word srvr answers with a
// Mode) and stops it by PID at cleanup. When java or the jars are missing,
// a test is skipped, or fails when LOCKER_REQUIRE_SERVERS=1 ([SkipOrFail]);
// the variants for TestMain ([Start], [StartEnsemble]) report
// [ErrNotInstalled] instead.
//
// [Standalone] (and [Start]) returns the external server named by
// LOCKER_ZK_ADDR when it is set, or starts a standalone server.
// [PrivateStandalone] always starts one, for tests that kill it.
// [NewEnsemble] (and [StartEnsemble]) starts an n-server ensemble; its
// members can be killed ([Server.Kill], SIGKILL), paused ([Server.Pause],
// SIGSTOP), resumed and restarted with their data ([Server.Restart]), and
// [Ensemble.Leader] finds the current leader.
//
// Timing: tickTime is 100 ms, so sessions may last from 200 ms
// (minSessionTimeout, 2 ticks) to 60 s; followers give up on a silent
// leader after 1 s (syncLimit 10 ticks). Servers keep ZooKeeper's default
// forceSync=yes: every write is fsynced, as in production.
//
// A JVM takes one to three seconds to start here: start one server per
// test package (in TestMain, or once with [Shared]) and share it.
//
// [Sessions] records the passwords of the sessions a client establishes
// (through its dialer), so that [CloseSession] can end one of them as an
// administrator would. Network faults between a client and a server are
// the business of package faultproxy.
package zktest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker/internal/proc"
)

const (
	// EnvZKAddr names an external ZooKeeper server (host:port) that
	// Standalone and Start return instead of starting one.
	EnvZKAddr = "LOCKER_ZK_ADDR"
	// EnvClasspath overrides the Java class path of the servers (by
	// default the jars of Debian's zookeeper package).
	EnvClasspath = "LOCKER_ZK_CLASSPATH"
	// EnvRequireServers, set to "1", turns a missing server into a test
	// failure instead of a skip (the same variable as package testserver).
	EnvRequireServers = proc.EnvRequireServers
	// EnvLog, set to "1", makes the servers log at INFO level instead of
	// WARN (into zookeeper.log in their directory, shown when a start
	// fails).
	EnvLog = "LOCKER_ZK_LOG"
)

// TickTime is the servers' tick: the unit of session timeouts, of
// heartbeats within an ensemble and of the limits below.
const TickTime = 100 * time.Millisecond

// MinSessionTimeout and MaxSessionTimeout bound the session timeouts the
// servers negotiate.
const (
	MinSessionTimeout = 2 * TickTime
	MaxSessionTimeout = 60 * time.Second
)

// ErrNotInstalled is returned when java or the ZooKeeper jars are missing
// and LOCKER_ZK_ADDR is not set.
var ErrNotInstalled = errors.New("zookeeper not installed; install it (apt-get install zookeeper) or set " +
	EnvZKAddr + "; set " + EnvRequireServers + "=1 to make this a failure")

// startTimeout bounds how long a server may take to serve requests.
const startTimeout = 60 * time.Second

// Server is one ZooKeeper server used by a test.
type Server struct {
	// Addr is the client address, host:port.
	Addr string
	// ID is the server's id (myid) in its ensemble, 0 for a standalone
	// server.
	ID int

	// The process controls (PID, Pause, Resume, Kill, Restart, Close):
	// a killed server keeps its data for Restart.
	*proc.Server

	dir string
}

// Ensemble is a set of servers that form one ZooKeeper ensemble.
type Ensemble struct {
	Servers []*Server
	dir     string
}

// SkipOrFail ends tb because of err from Start or StartEnsemble: it skips
// tb when err wraps ErrNotInstalled and LOCKER_REQUIRE_SERVERS is not "1",
// and fails it otherwise.
func SkipOrFail(tb testing.TB, err error) {
	tb.Helper()
	proc.SkipOrFail(tb, "zktest", err, ErrNotInstalled)
}

// Required reports whether LOCKER_REQUIRE_SERVERS=1.
func Required() bool { return proc.Required() }

// Standalone returns a ZooKeeper server for tb: the external one named by
// LOCKER_ZK_ADDR, or a standalone server started for tb and stopped at its
// cleanup. It skips or fails tb when there is none (SkipOrFail).
func Standalone(tb testing.TB) *Server {
	tb.Helper()
	return forTest(tb, Start)
}

// PrivateStandalone is Standalone for a test that needs a server process of
// its own, to kill or pause it; it ignores LOCKER_ZK_ADDR.
func PrivateStandalone(tb testing.TB) *Server {
	tb.Helper()
	return forTest(tb, StartPrivate)
}

func forTest(tb testing.TB, start func() (*Server, error)) *Server {
	tb.Helper()
	return proc.ForTest(tb, "zktest", start, ErrNotInstalled)
}

// Start is Standalone for TestMain: it returns the external server named by
// LOCKER_ZK_ADDR, after checking that it serves requests, or starts a
// standalone server. The caller must Close it.
func Start() (*Server, error) {
	if addr := os.Getenv(EnvZKAddr); addr != "" {
		if _, err := waitServing(addr, startTimeout, nil); err != nil {
			return nil, fmt.Errorf("external zookeeper %s (%s): %w", addr, EnvZKAddr, err)
		}
		return &Server{Addr: addr, Server: proc.NewExternal("zktest", addr)}, nil
	}
	return StartPrivate()
}

// StartPrivate starts a standalone server whether or not LOCKER_ZK_ADDR is
// set. The caller must Close it.
func StartPrivate() (*Server, error) {
	java, cp, err := findJava()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "locker-zk-")
	if err != nil {
		return nil, fmt.Errorf("zktest: %w", err)
	}
	var s *Server
	err = proc.StartOnFreePort(5, func(port int) error {
		cfg := config(dir, port, "")
		if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(cfg), 0o600); err != nil {
			return err
		}
		s = newServer(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 0, dir, dir, java, jvmArgs(cp, filepath.Join(dir, "zoo.cfg")))
		return s.Start()
	})
	if err == nil {
		return s, nil
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("zktest: starting zookeeper: %w", err)
}

// NewEnsemble starts an ensemble of n servers for tb and stops it at tb's
// cleanup. It skips or fails tb when ZooKeeper is missing (SkipOrFail).
func NewEnsemble(tb testing.TB, n int) *Ensemble {
	tb.Helper()
	return proc.ForTest(tb, "zktest", func() (*Ensemble, error) { return StartEnsemble(n) }, ErrNotInstalled)
}

// StartEnsemble is NewEnsemble for TestMain. It returns once every server
// serves requests. The caller must Close it.
func StartEnsemble(n int) (*Ensemble, error) {
	if n < 1 {
		return nil, fmt.Errorf("zktest: ensemble of %d servers", n)
	}
	java, cp, err := findJava()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "locker-zkens-")
	if err != nil {
		return nil, fmt.Errorf("zktest: %w", err)
	}
	var lastErr error
	for range 3 {
		e, err := startEnsemble(dir, java, cp, n)
		if err == nil {
			return e, nil
		}
		lastErr = err
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("zktest: starting a %d-server ensemble: %w", n, lastErr)
}

func startEnsemble(dir, java, cp string, n int) (*Ensemble, error) {
	ports, err := proc.FreePorts(3 * n)
	if err != nil {
		return nil, err
	}
	var members strings.Builder
	for i := range n {
		fmt.Fprintf(&members, "server.%d=127.0.0.1:%d:%d\n", i+1, ports[3*i+1], ports[3*i+2])
	}
	e := &Ensemble{dir: dir}
	for i := range n {
		sdir := filepath.Join(dir, strconv.Itoa(i+1))
		if err := os.RemoveAll(sdir); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Join(sdir, "data"), 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(sdir, "data", "myid"), []byte(strconv.Itoa(i+1)+"\n"), 0o600); err != nil {
			return nil, err
		}
		cfg := config(sdir, ports[3*i], members.String())
		if err := os.WriteFile(filepath.Join(sdir, "zoo.cfg"), []byte(cfg), 0o600); err != nil {
			return nil, err
		}
		s := newServer(net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[3*i])), i+1, sdir, "", java, jvmArgs(cp, filepath.Join(sdir, "zoo.cfg")))
		e.Servers = append(e.Servers, s)
	}
	// Start all, then wait: no server serves before a quorum has formed.
	procs := make([]*proc.Process, n)
	for i, s := range e.Servers {
		if procs[i], err = s.Launch(); err != nil {
			e.kill()
			return nil, err
		}
	}
	for i, s := range e.Servers {
		if _, err := waitServing(s.Addr, startTimeout, procs[i].Done()); err != nil {
			err = fmt.Errorf("server %d: %w; log:\n%s", s.ID, err, s.logTail())
			e.kill()
			return nil, err
		}
	}
	return e, nil
}

// kill stops every server of e without removing the directory.
func (e *Ensemble) kill() {
	for _, s := range e.Servers {
		_ = s.Kill()
	}
}

// Addrs returns the client addresses of the servers.
func (e *Ensemble) Addrs() []string {
	addrs := make([]string, len(e.Servers))
	for i, s := range e.Servers {
		addrs[i] = s.Addr
	}
	return addrs
}

// Leader waits up to timeout for a server to report itself the leader
// (four-letter word srvr) and returns it.
func (e *Ensemble) Leader(timeout time.Duration) (*Server, error) {
	deadline := time.Now().Add(timeout)
	for {
		for _, s := range e.Servers {
			if s.PID() == 0 {
				continue
			}
			if mode, err := s.Mode(); err == nil && mode == "leader" {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("zktest: no leader within %v", timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitServing waits up to timeout until every running server of e serves
// requests (after a leader was killed, until a new leader has been
// elected and the others follow it).
func (e *Ensemble) WaitServing(timeout time.Duration) error {
	for _, s := range e.Servers {
		p := s.Process()
		if p == nil {
			continue
		}
		if _, err := waitServing(s.Addr, timeout, p.Done()); err != nil {
			return fmt.Errorf("zktest: server %d: %w", s.ID, err)
		}
	}
	return nil
}

// Close stops every server and removes the ensemble's directory.
func (e *Ensemble) Close() error {
	var errs []error
	for _, s := range e.Servers {
		errs = append(errs, s.Close())
	}
	errs = append(errs, os.RemoveAll(e.dir))
	return errors.Join(errs...)
}

// config returns a zoo.cfg for a server in dir listening on clientPort;
// members is the server.N lines of an ensemble, or empty.
func config(dir string, clientPort int, members string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "tickTime=%d\n", TickTime.Milliseconds())
	b.WriteString("initLimit=50\nsyncLimit=10\n")
	fmt.Fprintf(&b, "minSessionTimeout=%d\nmaxSessionTimeout=%d\n", MinSessionTimeout.Milliseconds(), MaxSessionTimeout.Milliseconds())
	fmt.Fprintf(&b, "dataDir=%s\n", filepath.Join(dir, "data"))
	fmt.Fprintf(&b, "clientPort=%d\nclientPortAddress=127.0.0.1\n", clientPort)
	b.WriteString("admin.enableServer=false\n4lw.commands.whitelist=*\n")
	b.WriteString("maxClientCnxns=0\nautopurge.purgeInterval=0\n")
	if members != "" {
		b.WriteString("standaloneEnabled=false\nreconfigEnabled=false\n")
		b.WriteString(members)
	}
	return b.String()
}

// jvmArgs returns java's arguments to run a server with cfg.
func jvmArgs(cp, cfg string) []string {
	level := "warn"
	if os.Getenv(EnvLog) == "1" {
		level = "info"
	}
	return []string{
		"-Xmx128m", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
		"-Djava.net.preferIPv4Stack=true",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=" + level,
		"-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-Dzookeeper.admin.enableServer=false",
		"-Dzookeeper.jmx.log4j.disable=true",
		"-Dzookeeper.cnxTimeout=1000",
		"-cp", cp,
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg,
	}
}

var javaOnce struct {
	sync.Once
	java, cp string
	err      error
}

// findJava returns the java binary and the class path of the servers.
func findJava() (java, cp string, err error) {
	javaOnce.Do(func() {
		javaOnce.java, javaOnce.cp, javaOnce.err = lookJava()
	})
	return javaOnce.java, javaOnce.cp, javaOnce.err
}

func lookJava() (string, string, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return "", "", fmt.Errorf("%w (java: %v)", ErrNotInstalled, err)
	}
	if cp := os.Getenv(EnvClasspath); cp != "" {
		return java, cp, nil
	}
	jar := "/usr/share/java/zookeeper.jar" // its manifest names its dependencies
	if _, err := os.Stat(jar); err != nil {
		jar = ""
		// Ask dpkg where the package put it.
		out, _ := exec.Command("dpkg", "-L", "libzookeeper-java", "zookeeper").Output()
		for _, line := range strings.Split(string(out), "\n") {
			base := filepath.Base(line)
			if strings.HasPrefix(base, "zookeeper-3") && strings.HasSuffix(base, ".jar") && !strings.Contains(base, "contrib") {
				jar = line
				break
			}
		}
		if jar == "" {
			return "", "", fmt.Errorf("%w (no zookeeper.jar in /usr/share/java or in dpkg -L zookeeper)", ErrNotInstalled)
		}
	}
	cp := jar
	// ZooKeeper logs through slf4j; without a binding it logs nothing.
	if _, err := os.Stat("/usr/share/java/slf4j-simple.jar"); err == nil {
		cp += ":/usr/share/java/slf4j-simple.jar"
	}
	return java, cp, nil
}

// newServer returns the (not yet started) server with the given address
// and id that runs java with args in dir; Close removes ownDir, if not
// empty.
func newServer(addr string, id int, dir, ownDir, java string, args []string) *Server {
	s := &Server{Addr: addr, ID: id, dir: dir}
	s.Server = proc.NewServer(proc.Config{
		Pkg:  "zktest",
		Addr: addr,
		Dir:  ownDir,
		Launch: func() (*proc.Process, error) {
			log, err := os.OpenFile(filepath.Join(dir, "zookeeper.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
			if err != nil {
				return nil, err
			}
			defer log.Close() // the child has its own descriptor
			cmd := exec.Command(java, args...)
			cmd.Dir = dir
			cmd.Stdout, cmd.Stderr = log, log
			return proc.Start(cmd)
		},
		Ready: func(p *proc.Process) error {
			if _, err := waitServing(addr, startTimeout, p.Done()); err != nil {
				return fmt.Errorf("%w; log:\n%s", err, s.logTail())
			}
			return nil
		},
	})
	return s
}

// logTail returns the end of the server's log.
func (s *Server) logTail() string { return proc.LogTail(filepath.Join(s.dir, "zookeeper.log"), 6000) }

// waitServing polls addr with srvr until it reports a Mode, the timeout
// passes, or exited is closed. It returns the mode.
func waitServing(addr string, timeout time.Duration, exited <-chan struct{}) (string, error) {
	var mode string
	err := proc.Poll("zookeeper "+addr, timeout, 50*time.Millisecond, exited, func() (err error) {
		mode, err = mode4lw(addr)
		return err
	})
	return mode, err
}

// mode4lw returns the Mode line of srvr: standalone, leader or follower.
func mode4lw(addr string) (string, error) {
	out, err := FourLetter(addr, "srvr")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		if m, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(m), nil
		}
	}
	return "", fmt.Errorf("srvr: %q", strings.TrimSpace(out))
}

// FourLetter sends a four-letter word (srvr, stat, cons, mntr, …) to the
// server at addr and returns its answer.
func FourLetter(addr, cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, cmd); err != nil {
		return "", err
	}
	b, err := io.ReadAll(bufio.NewReader(c))
	if err != nil && len(b) == 0 {
		return "", err
	}
	return string(b), nil
}

// Mode returns the server's mode (standalone, leader, follower) as srvr
// reports it, or an error when it does not serve requests.
func (s *Server) Mode() (string, error) { return mode4lw(s.Addr) }

// Shared returns a standalone server (or LOCKER_ZK_ADDR's) started once per
// test binary and shared by every test that calls it; it skips or fails tb
// like Standalone. StopShared, called from TestMain after the tests, stops
// it.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	shared.Lock()
	defer shared.Unlock()
	if shared.s == nil && shared.err == nil {
		shared.s, shared.err = Start()
	}
	if shared.err != nil {
		SkipOrFail(tb, shared.err)
		return nil
	}
	return shared.s
}

var shared struct {
	sync.Mutex
	s   *Server
	err error
}

// StopShared stops the server started by Shared, if any.
func StopShared() error {
	shared.Lock()
	defer shared.Unlock()
	if shared.s == nil {
		return nil
	}
	err := shared.s.Close()
	shared.s = nil
	return err
}
