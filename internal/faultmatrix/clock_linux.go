package faultmatrix

import (
	"syscall"
	"time"
	"unsafe"
)

// clockMonotonic is CLOCK_MONOTONIC of <time.h>.
const clockMonotonic = 1

// now returns the time on CLOCK_MONOTONIC, which every process of the
// host shares and no wall-clock step moves, so that events reported by
// helper children compare with the parent's.
func now() time.Duration {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		panic("faultmatrix: clock_gettime(CLOCK_MONOTONIC): " + errno.Error())
	}
	return time.Duration(ts.Nano())
}
