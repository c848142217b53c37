package driverkit_test

import (
	"context"
	"errors"
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
	if !driver.IsPermanent(err) || !errors.Is(err, closed) || !errors.Is(err, io) {
		t.Errorf("closed client: %v (permanent %v); want a permanent error wrapping both", err, driver.IsPermanent(err))
	}
	if err := driverkit.Closed(ctx, closed, closed); !driver.IsPermanent(err) || err.Error() != closed.Error() {
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
