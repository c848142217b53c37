package driverkit_test

import (
	"strings"
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
)

func TestCheckCount(t *testing.T) {
	ok := []driver.Request{
		{Mode: driver.Exclusive},
		{Mode: driver.Shared},
		{Mode: driver.Shared, Limit: 3, Weight: 1},
		{Mode: driver.Shared, Limit: 3, Weight: 3},
		{Mode: driver.Exclusive, Value: strings.Repeat("v", driver.MaxValueLen)},
	}
	for _, r := range ok {
		if err := driverkit.CheckCount(r); err != nil {
			t.Errorf("CheckCount(%+v) = %v; want nil", r, err)
		}
	}
	bad := []driver.Request{
		{Mode: driver.Shared, Limit: -1},
		{Mode: driver.Shared, Weight: 1},
		{Mode: driver.Exclusive, Limit: 2, Weight: 1},
		{Mode: driver.Shared, Limit: 2, Weight: 0},
		{Mode: driver.Shared, Limit: 2, Weight: 3},
		{Mode: driver.Exclusive, Value: strings.Repeat("v", driver.MaxValueLen+1)},
	}
	for _, r := range bad {
		if err := driverkit.CheckCount(r); err == nil || !driver.IsPermanent(err) {
			t.Errorf("CheckCount(Limit %d, Weight %d, Mode %v, %d-byte value) = %v; want a permanent error", r.Limit, r.Weight, r.Mode, len(r.Value), err)
		}
	}
}
