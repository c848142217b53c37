//go:build !unix

package drivertest

import "time"

// CPUTime returns 0: the process's CPU time is read on Unix systems only.
func CPUTime() time.Duration { return 0 }
