package driverkit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
)

func TestOpError(t *testing.T) {
	locked := &driver.LockedError{}
	var err error = &driverkit.OpError{Driver: "mydriver", Op: "acquire", Key: "a b", Err: fmt.Errorf("round 2: %w", locked)}
	if got, want := err.Error(), `mydriver: acquire "a b": round 2: `+locked.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	var le *driver.LockedError
	if !errors.As(err, &le) || le != locked {
		t.Error("errors.As does not find the wrapped *LockedError")
	}
	var oe *driverkit.OpError
	if !errors.As(driver.Permanent(err), &oe) || oe.Op != "acquire" || oe.Key != "a b" {
		t.Errorf("errors.As through Permanent = %+v", oe)
	}

	long := strings.Repeat("k", 600)
	err = &driverkit.OpError{Driver: "d", Op: "release", Key: long, Err: context.DeadlineExceeded}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Error("errors.Is does not see the cause")
	}
	if want := "d: release " + driver.QuoteKey(long) + ": " + context.DeadlineExceeded.Error(); err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	if len(err.Error()) > 200 {
		t.Errorf("a 600-byte key gives a %d-byte message", len(err.Error()))
	}
	if got := (&driverkit.OpError{Driver: "d", Op: "x", Key: "k"}).Error(); got != `d: x "k": <nil>` {
		t.Errorf("without a cause: %q", got)
	}
}

func ExampleOpError() {
	err := driver.Permanent(&driverkit.OpError{Driver: "mydriver", Op: "refresh", Key: "jobs/42", Err: driver.ErrNotHeld})
	fmt.Println(err)
	fmt.Println(errors.Is(err, driver.ErrNotHeld), driver.IsPermanent(err))
	// Output:
	// mydriver: refresh "jobs/42": lease not held
	// true true
}
