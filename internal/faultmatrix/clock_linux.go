package faultmatrix

import (
	"time"

	"golang.org/x/sys/unix"
)

// now returns the time on CLOCK_MONOTONIC, which every process of the
// host shares and no wall-clock step moves, so that events reported by
// helper children compare with the parent's.
func now() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("faultmatrix: clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	return time.Duration(ts.Nano())
}
