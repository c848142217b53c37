//go:build linux

package proc

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// setProcAttr makes the kernel kill the server when the test process dies
// without cleaning up (a panic or a killed test binary), so that no server
// outlives its test. It keeps the other attributes the caller set.
func setProcAttr(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

// descendants returns the pids of pid's children and their children, read
// from /proc: PostgreSQL's backends make themselves leaders of process
// groups of their own, which a signal to the postmaster's group misses.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces and parentheses.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) < 2 {
			continue
		}
		if pp, err := strconv.Atoi(f[1]); err == nil {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	for todo := children[pid]; len(todo) > 0; {
		c := todo[0]
		todo = append(todo[1:], children[c]...)
		out = append(out, c)
	}
	return out
}
