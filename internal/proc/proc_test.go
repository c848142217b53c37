package proc

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func TestFreePorts(t *testing.T) {
	ports, err := FreePorts(5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("ports %v: not distinct positive ports", ports)
		}
		seen[p] = true
	}
}

// sleeper returns a server that runs sleep; ready counts its runs.
func sleeper(t *testing.T) (*Server, *int) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("needs sleep and POSIX signals")
	}
	bin, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	runs := new(int)
	s := NewServer(Config{
		Pkg:    "proctest",
		Addr:   "sleep",
		Launch: func() (*Process, error) { return Start(exec.Command(bin, "60")) },
		Ready: func(p *Process) error {
			*runs++
			select {
			case <-p.Done():
				return errors.New("exited")
			default:
				return nil
			}
		},
		Dir: t.TempDir() + "/gone",
	})
	t.Cleanup(func() { _ = s.Close() })
	return s, runs
}

// state returns the process state letter of pid (R, S, T …), as ps reports it.
func state(t *testing.T, pid int) string {
	t.Helper()
	out, err := exec.Command("ps", "-o", "stat=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		t.Skipf("ps: %v", err)
	}
	if len(out) == 0 {
		return ""
	}
	return string(out[:1])
}

func TestServerControls(t *testing.T) {
	s, runs := sleeper(t)
	if s.PID() != 0 {
		t.Fatal("PID before Start")
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	pid := s.PID()
	if pid == 0 || *runs != 1 {
		t.Fatalf("after Start: PID %d, %d ready checks", pid, *runs)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if !s.Paused() {
		t.Fatal("Paused() = false after Pause")
	}
	deadline := time.Now().Add(5 * time.Second)
	for state(t, pid) != "T" {
		if time.Now().After(deadline) {
			t.Fatalf("paused process in state %q, want T", state(t, pid))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if s.Paused() {
		t.Fatal("Paused() = true after Resume")
	}
	if err := s.Pause(); err != nil { // Kill must end a stopped process too
		t.Fatal(err)
	}
	p := s.Process()
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("Kill returned before the process ended")
	}
	if err := p.Err(); err == nil {
		t.Fatal("a killed process exited cleanly")
	}
	if s.PID() != 0 {
		t.Fatal("PID after Kill")
	}
	if err := s.Kill(); err == nil {
		t.Fatal("Kill of a stopped server succeeded")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.PID() == 0 || s.PID() == pid || *runs != 2 {
		t.Fatalf("after Restart: PID %d (was %d), %d ready checks", s.PID(), pid, *runs)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if err := s.Restart(); err == nil {
		t.Fatal("Restart after Close succeeded")
	}
}

func TestReadyFailureKills(t *testing.T) {
	bin, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	var p *Process
	s := NewServer(Config{
		Pkg:    "proctest",
		Launch: func() (*Process, error) { return Start(exec.Command(bin, "60")) },
		Ready: func(q *Process) error {
			p = q
			return errors.New("not ready")
		},
	})
	defer s.Close()
	if err := s.Start(); err == nil {
		t.Fatal("Start succeeded though not ready")
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("the process of a failed start still runs")
	}
	if s.PID() != 0 {
		t.Fatal("a failed start left a PID")
	}
}

func TestExternal(t *testing.T) {
	s := NewExternal("proctest", "127.0.0.1:1")
	if !s.External() {
		t.Fatal("External() = false")
	}
	for name, f := range map[string]func() error{"Pause": s.Pause, "Resume": s.Resume, "Kill": s.Kill, "Restart": s.Restart, "Start": s.Start} {
		if err := f(); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s = %v, want ErrUnsupported", name, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestStopGrace checks that Close stops a server with its Stop signal,
// and kills one that ignores it once the grace has passed.
func TestStopGrace(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs POSIX signals")
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh binary")
	}
	for _, tc := range []struct {
		script string
		clean  bool
	}{
		{"trap 'exit 0' TERM; touch \"$1\"; while :; do sleep 0.05; done", true},
		{"trap '' TERM; touch \"$1\"; while :; do sleep 0.05; done", false},
	} {
		var p *Process
		trapped := filepath.Join(t.TempDir(), "trapped")
		s := NewServer(Config{
			Pkg: "proctest",
			Launch: func() (*Process, error) {
				var err error
				p, err = Start(exec.Command("sh", "-c", tc.script, "sh", trapped))
				return p, err
			},
			// Ready once the shell has set its trap.
			Ready: func(p *Process) error {
				return Poll("sh", 30*time.Second, 5*time.Millisecond, p.Done(), func() error {
					_, err := os.Stat(trapped)
					return err
				})
			},
			Stop:      syscall.SIGTERM,
			StopGrace: time.Second,
		})
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := p.Err(); (err == nil) != tc.clean {
			t.Errorf("%q: exit %v, want a clean exit: %v", tc.script, err, tc.clean)
		}
	}
}
