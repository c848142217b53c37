//go:build unix && !linux

package sqltest

import "syscall"

// procAttr runs a server process as cred (nil: as the caller).
func procAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: true}
}

// descendants returns nil: without /proc, signals reach the server's
// process group only.
func descendants(int) []int { return nil }
