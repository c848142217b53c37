package locker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
)

// TestErrorNamesKeyAndOpOnce: an *Error's prefix is the only place its
// message names the key and the operation, whatever the driver's error
// says, while the driver's error itself stays whole in the chain (for
// errors.As with its OpError).
func TestErrorNamesKeyAndOpOnce(t *testing.T) {
	ctx := context.Background()
	d := memdriver.New()
	c := locker.New(d, locker.WithErrorHandler(func(error) {}))
	defer c.Close(ctx)

	held, err := c.Semaphore("s2", 2).Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	_, err = c.Semaphore("s2", 3).Acquire(ctx, 1)
	if want := `locker: acquire "s2": memdriver: limit differs from the key's holders' (theirs: 2)`; err == nil || err.Error() != want {
		t.Errorf("size mismatch: %v; want %s", err, want)
	}
	if inner := findWrapped(err, `memdriver: `); inner == nil || !strings.Contains(inner.Error(), ` "s2": `) {
		t.Errorf("the driver's own error, naming its operation and the key, is not in the chain of %v", err)
	}

	closed := memdriver.New()
	closed.Close()
	err = locker.NewMutex(closed, "orders/42").LockContext(ctx)
	checkOnce(t, err, "lock", "orders/42", "memdriver: ")

	m := c.Mutex("jobs/7")
	h, err := m.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d.Backend().Expire("jobs/7")
	err = h.Refresh(ctx)
	checkOnce(t, err, "refresh", "jobs/7", "hold lost")
	checkOnce(t, m.UnlockContext(ctx), "unlock", "jobs/7", "hold lost")
	checkOnce(t, h.Err(), "hold", "jobs/7", "hold lost")

	// A key that a cause quotes in another role than "<op> <key>:" stays.
	e := &locker.Error{Op: "lock", Key: "k", Err: errors.New(`peer said "k": busy`)}
	if got, want := e.Error(), `locker: lock "k": peer said "k": busy`; got != want {
		t.Errorf("Error() = %q; want %q", got, want)
	}
	// Nested: a driver inside a quorum inside the front-end, each naming
	// its operation and the key as a driver's OpError does.
	e = &locker.Error{Op: "lock", Key: "k", Err: fmt.Errorf(`quorumdriver: acquire "k": %w`,
		errors.Join(fmt.Errorf(`redisdriver: try-acquire "k": %w`, errors.New("refused"))))}
	if got, want := e.Error(), `locker: lock "k": quorumdriver: redisdriver: refused`; got != want {
		t.Errorf("Error() = %q; want %q", got, want)
	}
}

// findWrapped returns the first error in err's chain (following Unwrap
// and joins) whose message starts with prefix, or nil.
func findWrapped(err error, prefix string) error {
	if err == nil {
		return nil
	}
	if strings.HasPrefix(err.Error(), prefix) {
		return err
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return findWrapped(u.Unwrap(), prefix)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if f := findWrapped(e, prefix); f != nil {
				return f
			}
		}
	}
	return nil
}

// checkOnce checks that err's message starts with the prefix of op and
// key, quotes the key once, and contains want.
func checkOnce(t *testing.T, err error, op, key, want string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s %q: no error", op, key)
		return
	}
	msg := err.Error()
	q := driver.QuoteKey(key)
	if !strings.HasPrefix(msg, "locker: "+op+" "+q+": ") || strings.Count(msg, q) != 1 || !strings.Contains(msg, want) {
		t.Errorf("%s %q: message %q; want one prefix naming them, the key once, and %q", op, key, msg, want)
	}
	t.Logf("%s", msg)
}
