package driverkit_test

import (
	"math"
	"slices"
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
)

func TestAdmit(t *testing.T) {
	x := driverkit.Claim{Mode: driver.Exclusive}
	s := driverkit.Claim{Mode: driver.Shared}
	c := func(limit, weight int64) driverkit.Claim {
		return driverkit.Claim{Mode: driver.Shared, Limit: limit, Weight: weight}
	}
	for _, tc := range []struct {
		name    string
		c       driverkit.Claim
		older   []driverkit.Claim
		granted bool
		limit   int64 // of the *LimitError, -1 for none
	}{
		{"exclusive, nothing older", x, nil, true, -1},
		{"exclusive behind shared", x, []driverkit.Claim{s}, false, -1},
		{"exclusive behind counted", x, []driverkit.Claim{c(3, 1)}, false, -1},
		{"shared behind shared", s, []driverkit.Claim{s, s}, true, -1},
		{"shared behind exclusive", s, []driverkit.Claim{s, x}, false, -1},
		{"shared behind counted", s, []driverkit.Claim{c(3, 1)}, false, 3},
		{"counted behind shared", c(3, 1), []driverkit.Claim{s}, false, 0},
		{"mismatch behind exclusive", c(3, 1), []driverkit.Claim{x, c(4, 1)}, false, 4},
		{"counted fits", c(5, 1), []driverkit.Claim{c(5, 4)}, true, -1},
		{"counted fits exactly", c(5, 3), []driverkit.Claim{c(5, 1), c(5, 1)}, true, -1},
		{"counted too heavy", c(5, 3), []driverkit.Claim{c(5, 4), c(5, 1)}, false, -1},
		{"counted behind exclusive", c(5, 1), []driverkit.Claim{x}, false, -1},
		{"largest limit", c(math.MaxInt64, math.MaxInt64), []driverkit.Claim{c(math.MaxInt64, 1)}, false, -1},
		{"largest limit, alone", c(math.MaxInt64, math.MaxInt64), nil, true, -1},
	} {
		granted, lerr := driverkit.Admit(tc.c, slices.Values(tc.older))
		limit := int64(-1)
		if lerr != nil {
			limit = lerr.Limit
		}
		if granted != tc.granted || limit != tc.limit {
			t.Errorf("%s: Admit = %v, limit error %d; want %v, %d", tc.name, granted, limit, tc.granted, tc.limit)
		}
	}
}
