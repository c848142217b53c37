//go:build !linux

package faultmatrix

import "time"

// now returns the wall-clock time: outside Linux the matrix has no
// monotonic clock shared between processes, so a wall-clock step during a
// run can distort the times helper children report.
func now() time.Duration { return time.Duration(time.Now().UnixNano()) }
