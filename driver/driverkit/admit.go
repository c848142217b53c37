package driverkit

import (
	"iter"

	"github.com/go-locker/locker/driver"
)

// A Claim is what the grant rule reads of a hold or a queue entry: its
// mode and, for a counted one (driver.Capabilities.Counted), its limit and
// weight; 0 for the others.
type Claim struct {
	Mode          driver.Mode
	Limit, Weight int64
}

// Admit applies the grant rule of a fair queue to c, given older: the
// claims before it in the key's queue, held or waiting, in any order. An
// exclusive claim is granted when there is none; a shared one when none
// is exclusive and, for a counted one, when its weight and theirs fit in
// its limit. A shared claim older than c with another limit (0 for an
// uncounted one) makes Admit return a *driver.LimitError with that limit:
// c must be refused.
func Admit(c Claim, older iter.Seq[Claim]) (bool, *driver.LimitError) {
	granted, sum := true, c.Weight
	for o := range older {
		switch {
		case c.Mode == driver.Exclusive:
			return false, nil
		case o.Mode == driver.Exclusive:
			granted = false
		case o.Limit != c.Limit:
			return false, &driver.LimitError{Limit: o.Limit}
		case c.Limit > 0 && sum > c.Limit-o.Weight: // no overflow: both ≤ Limit
			granted = false
		case c.Limit > 0:
			sum += o.Weight
		}
	}
	return granted, nil
}
