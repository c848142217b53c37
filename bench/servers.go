package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// The servers the bench starts: redis-server, ZooKeeper and etcd, each a
// process of its own on a free loopback port in a temporary directory,
// stopped by PID at the end. The bench process itself holds only clients,
// so its allocation and CPU counts are the clients' alone.

// errNotInstalled marks a server whose binary is missing.
var errNotInstalled = errors.New("not installed")

// server is one running server process.
type server struct {
	name string // "redis", "zk", "etcd"
	addr string // host:port of the client endpoint
	dir  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	log  string        // file with the process's output
	// extPID is the process id of a server this process did not start
	// (-use-servers), or that a helper started (closer): cmd is nil.
	extPID int
	// note completes the server's version in the report.
	note string
	// closer, when not nil, stops a server a helper started (FerretDB,
	// through internal/ferrettest); without it, stop leaves a server
	// without cmd running.
	closer io.Closer
}

// pid returns the server's process id.
func (s *server) pid() int {
	if s.cmd == nil {
		return s.extPID
	}
	return s.cmd.Process.Pid
}

// stop kills the server and removes its directory, unless another process
// started it.
func (s *server) stop() {
	if s != nil && s.closer != nil {
		_ = s.closer.Close()
		return
	}
	if s == nil || s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	_ = os.RemoveAll(s.dir)
}

// cpu returns the server process's user+system CPU time so far.
func (s *server) cpu() time.Duration { return procCPU(s.pid()) }

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs cmd with its output in dir/name.log and waits until ready
// reports nil, the process exits, or timeout passes.
func start(name, dir, addr string, cmd *exec.Cmd, ready func() error, timeout time.Duration) (*server, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr, cmd.Dir = f, f, dir
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s := &server{name: name, addr: addr, dir: dir, cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() { _ = cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(timeout)
	for {
		err := ready()
		if err == nil {
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("%s exited before it was ready (%v); log:\n%s", name, err, tail(logPath))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("%s not ready within %v: %v; log:\n%s", name, timeout, err, tail(logPath))
		}
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// startRedis starts redis-server without persistence.
func startRedis() (*server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server: %w (apt-get install redis-server)", errNotInstalled)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "locker-bench-redis-")
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", dir, "--protected-mode", "no", "--maxclients", "10000")
	s, err := start("redis", dir, addr, cmd, func() error {
		r, err := redisDo(addr, "PING")
		if err == nil && r != "PONG" {
			err = fmt.Errorf("PING answered %q", r)
		}
		return err
	}, 15*time.Second)
	if err != nil {
		_ = os.RemoveAll(dir)
	}
	return s, err
}

// redisDo sends one command over a fresh connection and returns the reply's
// first line (for a bulk string, the whole string).
func redisDo(addr string, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c, b.String()); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch {
	case line == "":
		return "", errors.New("empty reply")
	case line[0] == '-':
		return "", errors.New(line[1:])
	case line[0] == '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("bad bulk length %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return line[1:], nil
}

// ZooKeeper from Debian's package: the jar's manifest names its
// dependencies, /etc/zookeeper/conf holds the logging configuration.
const (
	zkJar     = "/usr/share/java/zookeeper.jar"
	zkConfDir = "/etc/zookeeper/conf"
)

// startZK starts a standalone ZooKeeper with forceSync on (the default).
func startZK() (*server, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("java: %w (apt-get install zookeeper)", errNotInstalled)
	}
	if _, err := os.Stat(zkJar); err != nil {
		return nil, fmt.Errorf("%s: %w (apt-get install zookeeper)", zkJar, errNotInstalled)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "locker-bench-zk-")
	if err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf("tickTime=2000\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\n"+
		"admin.enableServer=false\n4lw.commands.whitelist=*\nmaxClientCnxns=0\n", filepath.Join(dir, "data"), port)
	if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command(java, "-cp", zkConfDir+":"+zkJar, "-Dzookeeper.log.dir="+dir,
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(dir, "zoo.cfg"))
	s, err := start("zookeeper", dir, addr, cmd, func() error { return zkRuok(addr) }, 30*time.Second)
	if err != nil {
		_ = os.RemoveAll(dir)
	}
	return s, err
}

// zkRuok asks the server whether it is serving (four-letter word "ruok").
func zkRuok(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, "ruok"); err != nil {
		return err
	}
	b, _ := io.ReadAll(c)
	if string(b) != "imok" {
		return fmt.Errorf("ruok answered %q", b)
	}
	return nil
}

// etcd runs embedded (go.etcd.io/etcd/server/v3/embed) in a child process:
// the bench binary re-executes itself with envEtcdChild set to the data
// directory and the two ports, so that the server's allocations and CPU are
// not counted as the clients'.
const envEtcdChild = "LOCKER_BENCH_ETCD_CHILD"

// startEtcd starts the etcd child process with fsync on (the default).
func startEtcd() (*server, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cport, err := freePort()
	if err != nil {
		return nil, err
	}
	pport, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "locker-bench-etcd-")
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(cport))
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d,%d", envEtcdChild, filepath.Join(dir, "data"), cport, pport))
	s, err := start("etcd", dir, addr, cmd, func() error {
		b, err := os.ReadFile(filepath.Join(dir, "etcd.log"))
		if err == nil && !strings.Contains(string(b), "etcd-ready") {
			err = errors.New("not ready yet")
		}
		return err
	}, 30*time.Second)
	if err != nil {
		_ = os.RemoveAll(dir)
	}
	return s, err
}

// maybeServeEtcd runs the etcd child when this process is one, and then
// exits; otherwise it returns at once.
func maybeServeEtcd() {
	spec := os.Getenv(envEtcdChild)
	if spec == "" {
		return
	}
	if err := serveEtcd(spec); err != nil {
		fmt.Fprintln(os.Stderr, "etcd child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func serveEtcd(spec string) error {
	parts := strings.Split(spec, ",")
	if len(parts) != 3 {
		return fmt.Errorf("bad %s=%q", envEtcdChild, spec)
	}
	cu, _ := url.Parse("http://127.0.0.1:" + parts[1])
	pu, _ := url.Parse("http://127.0.0.1:" + parts[2])
	cfg := embed.NewConfig()
	cfg.Dir = parts[0]
	cfg.Name = "bench"
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{"stderr"}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		return errors.New("not ready within 30s")
	}
	fmt.Println("etcd-ready")
	// Run until killed; also end when the parent is gone (stdin closes
	// only if it was a pipe, so rely on Pdeathsig on Linux and on the
	// parent's kill elsewhere).
	ctx := context.Background()
	select {
	case err := <-e.Err():
		return err
	case <-ctx.Done():
		return nil
	}
}
