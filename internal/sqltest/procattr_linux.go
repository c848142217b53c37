//go:build linux

package sqltest

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// procAttr runs a server process as cred (nil: as the caller), in a
// process group of its own (so that Crash kills its children too), and makes
// the kernel kill it when the test process dies without cleaning up, so
// that no server outlives its test.
func procAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// descendants returns the pids of pid's children and their children, read
// from /proc: PostgreSQL's backends make themselves leaders of process
// groups of their own, which a signal to the postmaster's group misses.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent := map[int]int{}
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
			parent[p] = pp
		}
	}
	var out []int
	var walk func(int)
	walk = func(p int) {
		for c, pp := range parent {
			if pp == p {
				out = append(out, c)
				walk(c)
			}
		}
	}
	walk(pid)
	return out
}
