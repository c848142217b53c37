// Package proc runs the server processes of tests (redis-server, ZooKeeper's
// JVM, an etcd server in a process of its own): it starts them so that they
// die with the test binary, and pauses (SIGSTOP), resumes (SIGCONT), kills
// (SIGKILL) and restarts them by PID, with every process of a server that
// forks workers (StartGroup). It also holds what every server
// package of the tests needs: free loopback ports and the
// LOCKER_REQUIRE_SERVERS switch.
package proc

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// EnvRequireServers, set to "1", turns a missing server binary into a test
// failure instead of a skip.
const EnvRequireServers = "LOCKER_REQUIRE_SERVERS"

// Required reports whether LOCKER_REQUIRE_SERVERS=1.
func Required() bool { return os.Getenv(EnvRequireServers) == "1" }

// SkipOrFail ends tb because of err from starting a server: it skips tb
// when err wraps notInstalled and LOCKER_REQUIRE_SERVERS is not "1", and
// fails it otherwise. pkg names the caller's package in the message.
func SkipOrFail(tb testing.TB, pkg string, err, notInstalled error) {
	tb.Helper()
	if errors.Is(err, notInstalled) && !Required() {
		tb.Skip(err.Error())
	}
	tb.Fatalf("%s: %v", pkg, err)
}

// ForTest starts a server with start for tb and closes it at tb's cleanup,
// reporting a failed Close as an error of tb. When start fails, it skips
// or fails tb as SkipOrFail does (notInstalled may be nil: then it fails).
func ForTest[S io.Closer](tb testing.TB, pkg string, start func() (S, error), notInstalled error) S {
	tb.Helper()
	s, err := start()
	if err != nil {
		SkipOrFail(tb, pkg, err, notInstalled)
		var zero S
		return zero
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("%s: %v", pkg, err)
		}
	})
	return s
}

// Poll calls try every interval until it succeeds, timeout passes, or
// exited (nil: never) is closed, and returns nil or an error that names
// what (a server and its address) and wraps try's last error.
func Poll(what string, timeout, interval time.Duration, exited <-chan struct{}, try func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := try()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited before it served: %w", what, err)
		case <-time.After(interval):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not serving within %v: %w", what, timeout, err)
		}
	}
}

// LogTail returns the last max bytes of the file at path, for error
// messages; nothing if it cannot be read.
func LogTail(path string, max int) string {
	b, _ := os.ReadFile(path)
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// StartOnFreePort calls start with a free loopback TCP port until it
// returns nil, at most tries times, since another process may take the
// port between FreePorts and the server's bind. It returns start's last
// error.
func StartOnFreePort(tries int, start func(port int) error) error {
	var last error
	for range tries {
		ports, err := FreePorts(1)
		if err != nil {
			last = err
			continue
		}
		if last = start(ports[0]); last == nil {
			return nil
		}
	}
	return last
}

// FreePorts returns n distinct loopback TCP ports that were free a moment
// ago (someone else may take one before the caller binds it).
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// A Process is one run of a command.
type Process struct {
	cmd   *exec.Cmd
	group bool          // started by StartGroup
	done  chan struct{} // closed when cmd.Wait has returned
	err   error         // cmd.Wait's result, valid after done
}

// Prepare arranges (on Linux) for cmd to be killed when the test process
// dies without cleaning up, so that no server outlives its test, keeping
// the attributes the caller set in cmd.SysProcAttr (a credential). Start
// calls it; a command run another way (CombinedOutput) may call it itself.
func Prepare(cmd *exec.Cmd) { setProcAttr(cmd) }

// Start starts cmd, prepared with Prepare.
func Start(cmd *exec.Cmd) (*Process, error) { return start(cmd, false) }

// StartGroup is Start for a server that forks workers (PostgreSQL's
// backends): cmd runs in a process group of its own, and the Process's
// signals (Pause, Resume, Kill) reach that group and, on Linux, every
// descendant of cmd, those that made groups of their own included.
func StartGroup(cmd *exec.Cmd) (*Process, error) {
	setGroup(cmd)
	return start(cmd, true)
}

func start(cmd *exec.Cmd, group bool) (*Process, error) {
	Prepare(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, group: group, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// PID returns the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited and been waited for.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err returns how the process ended (cmd.Wait's result); it is valid once
// Done is closed.
func (p *Process) Err() error {
	<-p.done
	return p.err
}

// Kill ends the process at once (SIGKILL; a stopped process is continued
// first) and waits for it.
func (p *Process) Kill() {
	_ = p.cont()
	p.kill()
	<-p.done
}

// Stop asks the process to end with sig (continuing it first, if paused),
// waits up to grace for it, and kills it (Kill) if it has not ended by then.
func (p *Process) Stop(sig os.Signal, grace time.Duration) {
	_ = p.cont()
	if err := p.cmd.Process.Signal(sig); err == nil {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.done:
			return
		case <-t.C:
		}
	}
	p.Kill()
}

// Config describes a server process for NewServer.
type Config struct {
	// Pkg names the calling package in errors.
	Pkg string
	// Addr is the server's address, for errors.
	Addr string
	// Launch starts one run of the server and returns at once.
	Launch func() (*Process, error)
	// Ready waits until the run p serves requests, or returns an error
	// (p.Done tells whether it exited). It may be nil.
	Ready func(p *Process) error
	// Dir, if not empty, is removed by Close.
	Dir string
	// Stop, if not nil, is the signal Close sends for a clean shutdown
	// (which leaves no shared memory behind), killing the server if it
	// has not exited within StopGrace (10 seconds if zero). Without it,
	// Close kills the server.
	Stop os.Signal
	// StopGrace bounds the clean shutdown of Close.
	StopGrace time.Duration
}

// A Server is a server process that can be paused, resumed, killed and
// restarted, or an external server that supports none of that. Its methods
// are safe for concurrent use.
type Server struct {
	cfg      Config
	external bool

	mu      sync.Mutex
	proc    *Process // nil when not running
	stopped bool     // paused
	closed  bool
}

// NewServer returns a controller of the server cfg describes; nothing runs
// until Start.
func NewServer(cfg Config) *Server { return &Server{cfg: cfg} }

// NewExternal returns the controller of a server the test does not run:
// its process controls return errors wrapping errors.ErrUnsupported and
// Close does nothing.
func NewExternal(pkg, addr string) *Server {
	return &Server{cfg: Config{Pkg: pkg, Addr: addr}, external: true}
}

// External reports whether the server is one the test does not run.
func (s *Server) External() bool { return s.external }

// Start launches the server and waits until it is ready. On error the
// process is gone.
func (s *Server) Start() error {
	p, err := s.Launch()
	if err != nil {
		return err
	}
	return s.waitReady(p)
}

// Launch starts the server without waiting for it to be ready (the members
// of an ensemble wait for each other) and returns the new run.
func (s *Server) Launch() (*Process, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.external:
		return nil, s.unsupported("Launch")
	case s.closed:
		return nil, errors.New("server closed")
	case s.proc != nil:
		return nil, errors.New("server already running")
	}
	p, err := s.cfg.Launch()
	if err != nil {
		return nil, err
	}
	s.proc, s.stopped = p, false
	return p, nil
}

// waitReady waits for run p to be ready, and kills it if it is not.
func (s *Server) waitReady(p *Process) error {
	if s.cfg.Ready == nil {
		return nil
	}
	if err := s.cfg.Ready(p); err != nil {
		s.mu.Lock()
		if s.proc == p {
			s.proc, s.stopped = nil, false
		}
		s.mu.Unlock()
		p.Kill()
		return err
	}
	return nil
}

// Process returns the current run, or nil when the server is not running.
func (s *Server) Process() *Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// PID returns the process id of the server, or 0 for an external server or
// one that is not running.
func (s *Server) PID() int {
	if p := s.Process(); p != nil {
		return p.PID()
	}
	return 0
}

func (s *Server) unsupported(op string) error {
	return fmt.Errorf("%s: %s on external server %s: %w", s.cfg.Pkg, op, s.cfg.Addr, errors.ErrUnsupported)
}

// running returns the current run; s.mu is held.
func (s *Server) running(op string) (*Process, error) {
	if s.external {
		return nil, s.unsupported(op)
	}
	if s.proc == nil {
		return nil, fmt.Errorf("%s: %s: server %s is not running", s.cfg.Pkg, op, s.cfg.Addr)
	}
	return s.proc, nil
}

// Pause stops the server process (SIGSTOP): it keeps its connections and
// data but answers nothing until Resume.
func (s *Server) Pause() error { return s.signal("Pause", (*Process).stop, true) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error { return s.signal("Resume", (*Process).cont, false) }

func (s *Server) signal(op string, sig func(*Process) error, stopped bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.running(op)
	if err != nil {
		return err
	}
	if err := sig(p); err != nil {
		if stopped {
			// Do not leave a server half paused.
			_ = p.cont()
		}
		return fmt.Errorf("%s: %s: %w", s.cfg.Pkg, op, err)
	}
	s.stopped = stopped
	return nil
}

// Paused reports whether the server is paused.
func (s *Server) Paused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}

// Kill ends the server process at once (SIGKILL), as a crash would, and
// waits for it. What it wrote to disk stays for Restart.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.running("Kill"); err != nil {
		return err
	}
	s.kill()
	return nil
}

// kill kills the running process, if any, and waits for it; s.mu is held.
func (s *Server) kill() {
	if s.proc == nil {
		return
	}
	s.proc.Kill()
	s.proc, s.stopped = nil, false
}

// Restart kills the server if it runs and starts it again (on the same
// address, with what it wrote to disk), waiting until it is ready.
func (s *Server) Restart() error {
	s.mu.Lock()
	if s.external {
		s.mu.Unlock()
		return s.unsupported("Restart")
	}
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("%s: Restart after Close", s.cfg.Pkg)
	}
	s.kill()
	s.mu.Unlock()
	if err := s.Start(); err != nil {
		return fmt.Errorf("%s: Restart: %w", s.cfg.Pkg, err)
	}
	return nil
}

// Close kills the server and removes its directory (Config.Dir). It does
// nothing to an external server, and nothing the second time.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.external {
		return nil
	}
	s.closed = true
	if s.cfg.Stop != nil && s.proc != nil {
		grace := s.cfg.StopGrace
		if grace == 0 {
			grace = 10 * time.Second
		}
		s.proc.Stop(s.cfg.Stop, grace)
		s.proc = nil
	}
	s.kill()
	if s.cfg.Dir != "" {
		if err := os.RemoveAll(s.cfg.Dir); err != nil {
			return fmt.Errorf("%s: %w", s.cfg.Pkg, err)
		}
	}
	return nil
}
