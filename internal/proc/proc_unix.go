//go:build unix

package proc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// setGroup puts cmd in a process group of its own.
func setGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// signal sends sig to p or, for a group, to p's process group and every
// descendant of p (in groups of their own or not). It returns the error
// of the signal to p or its group.
func (p *Process) signal(sig syscall.Signal) error {
	pid := p.cmd.Process.Pid
	if !p.group {
		return p.cmd.Process.Signal(sig)
	}
	// The descendants first: once the group's signal has killed pid,
	// they are no longer its children.
	kids := descendants(pid)
	err := syscall.Kill(-pid, sig)
	for _, c := range kids {
		_ = syscall.Kill(c, sig)
	}
	return err
}

// stop stops p (SIGSTOP) and, where /proc tells, waits until every thread
// of p (and of its descendants, for a group) has stopped: kill(2) returns
// before the signal has taken effect, and a thread running on another CPU
// may still answer a request sent right after it (seen as "a paused
// server answered" on a loaded machine). For a group it stops the leader
// first and then signals the descendants again: a child forked just
// before the leader stopped, which had made a group of its own before the
// group's signal, would miss it (seen as a PostgreSQL backend still
// running after a Pause).
func (p *Process) stop() error {
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	pid := p.cmd.Process.Pid
	if err := waitStopped(pid, 5*time.Second); err != nil {
		return err
	}
	if !p.group {
		return nil
	}
	kids := descendants(pid)
	for _, c := range kids {
		_ = syscall.Kill(c, syscall.SIGSTOP)
	}
	for _, c := range kids {
		if err := waitStopped(c, 5*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// cont continues p (SIGCONT).
func (p *Process) cont() error { return p.signal(syscall.SIGCONT) }

// kill sends SIGKILL to p (to every process of a group, stopped first so
// that none forks or leaves the tree meanwhile).
func (p *Process) kill() {
	if p.group {
		_ = p.stop()
	}
	_ = p.signal(syscall.SIGKILL)
}

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
// that are not stopped (state T or t), dead (Z, X) or in uninterruptible
// sleep (D).
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
		// A thread in uninterruptible sleep (D) runs no code of its
		// process before it stops: the pending SIGSTOP takes effect on
		// its way back (a vfork parent waits in D for its child, which
		// may be stopped itself).
		switch s[i+2] {
		case 'T', 't', 'Z', 'X', 'D':
		default:
			n++
		}
	}
	return n, nil
}
