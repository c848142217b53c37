//go:build unix

package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// signalStop stops p and, where /proc tells, waits until every thread of p
// has stopped: kill(2) returns before the signal has taken effect, and a
// thread running on another CPU may still answer a request sent right
// after it (seen as "a paused server answered" on a loaded machine).
func signalStop(p *os.Process) error {
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	return waitStopped(p.Pid, 5*time.Second)
}

func signalCont(p *os.Process) error { return p.Signal(syscall.SIGCONT) }

// waitStopped waits until every thread of pid is in state T (stopped),
// polling /proc. Without /proc it returns at once.
func waitStopped(pid int, limit time.Duration) error {
	tasks := filepath.Join("/proc", fmt.Sprint(pid), "task")
	if _, err := os.Stat(tasks); err != nil {
		return nil // no /proc: nothing to wait on
	}
	deadline := time.Now().Add(limit)
	for {
		running, err := runningThreads(tasks)
		if err != nil || running == 0 {
			return nil // gone (a dead process answers nothing either) or stopped
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d: %d threads still running %v after SIGSTOP", pid, running, limit)
		}
		time.Sleep(time.Millisecond)
	}
}

// runningThreads counts the threads under a /proc/<pid>/task directory
// that are not stopped (state T or t) or dead (Z, X).
func runningThreads(tasks string) (int, error) {
	ents, err := os.ReadDir(tasks)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(tasks, e.Name(), "stat"))
		if err != nil {
			continue // the thread ended
		}
		// The state follows the command name, which is in parentheses
		// and may itself contain them.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) {
			continue
		}
		switch s[i+2] {
		case 'T', 't', 'Z', 'X':
		default:
			n++
		}
	}
	return n, nil
}
