//go:build !unix

package proc

import (
	"errors"
	"os/exec"
)

func setGroup(*exec.Cmd) {}

func (p *Process) stop() error { return errors.ErrUnsupported }
func (p *Process) cont() error { return errors.ErrUnsupported }
func (p *Process) kill()       { _ = p.cmd.Process.Kill() }
