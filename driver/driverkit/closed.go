package driverkit

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-locker/locker/driver"
)

// Closed returns err, the error of a call made with ctx, marked
// [driver.Permanent] and wrapping closed when closed is not nil: the
// driver or its client is closed, which no retry cures (a closed client
// fails its requests with errors of its own, often transient-looking ones,
// or with its own context's cancellation). err is returned as it is when
// closed is nil, when err is nil or permanent already, and when it is
// ctx's own error: the caller gave up first.
func Closed(ctx context.Context, err, closed error) error {
	if err == nil || closed == nil || driver.IsPermanent(err) || (ctx.Err() != nil && errors.Is(err, ctx.Err())) {
		return err
	}
	if !errors.Is(err, closed) {
		err = fmt.Errorf("%w: %w", closed, err)
	}
	return driver.Permanent(err)
}
