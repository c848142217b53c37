//go:build linux

package main

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// setProcAttr makes the kernel kill a server when the bench dies without
// cleaning up.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// procCPU returns the user+system CPU time of process pid, from
// /proc/pid/stat, or 0 if it cannot be read.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	// Fields after the command name, which is in parentheses and may
	// contain spaces: state is field 3, utime 14, stime 15.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const hz = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / hz
}

// selfCPU returns this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// spinSlack is the tail of a critical section that is spun rather than
// slept: nanosleep overshoots by its timer slack plus wake-up latency.
const spinSlack = 15 * time.Microsecond

// work occupies the caller for d without using time.Sleep, whose
// netpoller-based timers round to about a millisecond on this kind of VM:
// a blocking nanosleep(2) with the thread's timer slack lowered to 1 ns
// for all but the last spinSlack, then a spin on the monotonic clock.
func work(d time.Duration) {
	end := time.Now().Add(d)
	if s := d - spinSlack; s > 0 {
		runtime.LockOSThread()
		_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
		ts := unix.NsecToTimespec(int64(s))
		for {
			var rem unix.Timespec
			if err := unix.Nanosleep(&ts, &rem); err != unix.EINTR {
				break
			}
			ts = rem
		}
		runtime.UnlockOSThread()
	}
	for time.Now().Before(end) {
	}
}
