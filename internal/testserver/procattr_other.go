//go:build !linux

package testserver

import "os/exec"

func setProcAttr(*exec.Cmd) {}
