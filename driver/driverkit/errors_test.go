package driverkit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
)

func TestClosed(t *testing.T) {
	closed := errors.New("client closed")
	io := errors.New("connection reset")
	ctx := context.Background()
	if err := driverkit.Closed(ctx, io, nil); err != io {
		t.Errorf("open client: %v; want the error as it is", err)
	}
	if err := driverkit.Closed(ctx, nil, closed); err != nil {
		t.Errorf("no error: %v", err)
	}
	err := driverkit.Closed(ctx, io, closed)
	if !driver.IsPermanent(err) || !errors.Is(err, closed) || !errors.Is(err, io) || !errors.Is(err, driver.ErrClosed) {
		t.Errorf("closed client: %v (permanent %v); want a permanent error wrapping driver.ErrClosed and both", err, driver.IsPermanent(err))
	}
	if err := driverkit.Closed(ctx, closed, closed); !driver.IsPermanent(err) || err.Error() != driver.ErrClosed.Error()+": "+closed.Error() {
		t.Errorf("closed client, its own error: %v; want it permanent, not wrapped twice", err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := driverkit.Closed(done, context.Canceled, closed); err != context.Canceled {
		t.Errorf("caller's cancellation: %v; want context.Canceled as it is", err)
	}
	perm := driver.Permanent(io)
	if err := driverkit.Closed(ctx, perm, closed); err != perm {
		t.Errorf("permanent already: %v; want it as it is", err)
	}
}

func TestErrors(t *testing.T) {
	io := errors.New("connection reset")
	bad := errors.New("syntax error")
	var closed error
	e := &driverkit.Errors{
		Driver:    "mydriver",
		Closed:    func(error) error { return closed },
		Permanent: func(err error) bool { return errors.Is(err, bad) },
	}
	ctx := context.Background()
	if err := e.Wrap(ctx, "acquire", "k", nil); err != nil {
		t.Errorf("Wrap(nil) = %v", err)
	}
	if err := e.Begin(ctx, "acquire", "k"); err != nil {
		t.Errorf("Begin, open = %v", err)
	}
	var oe *driverkit.OpError
	err := e.Wrap(ctx, "acquire", "k", io)
	if driver.IsPermanent(err) || !errors.As(err, &oe) || oe.Op != "acquire" || err.Error() != `mydriver: acquire "k": connection reset` {
		t.Errorf("transient: %v", err)
	}
	if err := e.Wrap(ctx, "acquire", "k", bad); !driver.IsPermanent(err) || !errors.Is(err, bad) {
		t.Errorf("Permanent: %v; want it permanent", err)
	}
	closed = errors.New("Close was called")
	for _, err := range []error{e.Wrap(ctx, "refresh", "k", io), e.Begin(ctx, "refresh", "k")} {
		if !driver.IsPermanent(err) || !errors.Is(err, driver.ErrClosed) || !errors.Is(err, closed) || !errors.As(err, &oe) {
			t.Errorf("closed: %v; want a permanent *OpError wrapping driver.ErrClosed", err)
		}
	}
	if err := e.Wrap(ctx, "release", "k", driver.ErrNotHeld); driver.IsPermanent(err) || !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("an answer after the close: %v; want it as it is, named", err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := e.Begin(done, "acquire", "k"); !errors.Is(err, context.Canceled) || driver.IsPermanent(err) {
		t.Errorf("Begin, done context: %v; want context.Canceled, not permanent", err)
	}
}

func ExampleErrors() {
	var closed bool
	errs := driverkit.Errors{Driver: "mydriver", Closed: func(error) error {
		if closed {
			return errors.New("Close was called")
		}
		return nil
	}}
	ctx := context.Background()
	fmt.Println(errs.Wrap(ctx, "refresh", "jobs/42", driver.ErrNotHeld))
	closed = true
	err := errs.Begin(ctx, "acquire", "jobs/42")
	fmt.Println(err)
	fmt.Println(errors.Is(err, driver.ErrClosed), driver.IsPermanent(err))
	// Output:
	// mydriver: refresh "jobs/42": lease not held
	// mydriver: acquire "jobs/42": driver or client closed: Close was called
	// true true
}
