package driverkit

import (
	"fmt"

	"github.com/go-locker/locker/driver"
)

// CheckCount checks the fields of req that counted requests and values
// add (Limit, Weight, Value). The front-end validates every request, and
// a driver does not check them again (see package driver): CheckCount is
// kept only until the drivers that still call it stop, and then goes. A
// failure is a bug in the caller, and the error is marked Permanent. It accepts Limit and
// Weight both 0 (an uncounted request), or a Shared request with
// 1 ≤ Weight ≤ Limit, and a Value of at most MaxValueLen bytes.
func CheckCount(req driver.Request) error {
	var err error
	switch {
	case req.Limit < 0:
		err = fmt.Errorf("negative limit %d", req.Limit)
	case req.Limit == 0 && req.Weight != 0:
		err = fmt.Errorf("weight %d without a limit", req.Weight)
	case req.Limit > 0 && req.Mode != driver.Shared:
		err = fmt.Errorf("limit %d on a %v request: only shared requests are counted", req.Limit, req.Mode)
	case req.Limit > 0 && (req.Weight < 1 || req.Weight > req.Limit):
		err = fmt.Errorf("weight %d outside [1, %d]", req.Weight, req.Limit)
	case len(req.Value) > driver.MaxValueLen:
		err = fmt.Errorf("value of %d bytes, more than MaxValueLen (%d)", len(req.Value), driver.MaxValueLen)
	}
	return driver.Permanent(err)
}
