//go:build !linux

package main

import (
	"os/exec"
	"time"
)

func setProcAttr(*exec.Cmd) {}

func procCPU(int) time.Duration { return 0 }

func selfCPU() time.Duration { return 0 }

// work spins for d: time.Sleep is too coarse for a 100 µs critical section.
func work(d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
	}
}
