//go:build !linux

package proc

import "os/exec"

func setProcAttr(*exec.Cmd) {}

// descendants returns nil: without /proc, a group's signals reach its
// process group only.
func descendants(int) []int { return nil }
