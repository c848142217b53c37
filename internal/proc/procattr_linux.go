//go:build linux

package proc

import (
	"os/exec"
	"syscall"
)

// setProcAttr makes the kernel kill the server when the test process dies
// without cleaning up (a panic or a killed test binary), so that no server
// outlives its test.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
