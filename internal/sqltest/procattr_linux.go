//go:build linux

package sqltest

import "syscall"

// procAttr runs a server process as cred (nil: as the caller), in a
// process group of its own (so that Crash kills its children too), and makes
// the kernel kill it when the test process dies without cleaning up, so
// that no server outlives its test.
func procAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
