package locker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
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
	// Nested: drivers inside a quorum inside the front-end, each error an
	// OpError of the key, joined and wrapped on the way.
	e = &locker.Error{Op: "lock", Key: "k", Err: fmt.Errorf("retrying: %w", &driverkit.OpError{Driver: "quorumdriver", Op: "acquire", Key: "k",
		Err: errors.Join(
			&driverkit.OpError{Driver: "redisdriver", Op: "try-acquire", Key: "k", Err: errors.New("refused")},
			&driverkit.OpError{Driver: "redisdriver", Op: "try-acquire", Key: "k", Err: errors.New("timeout")})})}
	if got, want := e.Error(), "locker: lock \"k\": retrying: quorumdriver: redisdriver: refused\nredisdriver: timeout"; got != want {
		t.Errorf("Error() = %q; want %q", got, want)
	}
}

// TestErrorFormatsFields: an *Error's message is made from the fields of
// its chain, never by editing the text of a cause: a cause that names
// the key in its text only keeps it, an OpError of another key keeps its
// operation and key, and a wrapped *Error of another key keeps them too,
// without a second "locker:" prefix.
func TestErrorFormatsFields(t *testing.T) {
	for _, c := range []struct {
		err  *locker.Error
		want string
	}{
		{&locker.Error{Op: "lock", Key: "k", Err: errors.New(`redisdriver: try-acquire "k": refused`)},
			`locker: lock "k": redisdriver: try-acquire "k": refused`},
		{&locker.Error{Op: "lock", Key: "k", Err: &driverkit.OpError{Driver: "etcddriver", Op: "acquire", Key: "other", Err: errors.New("refused")}},
			`locker: lock "k": etcddriver: acquire "other": refused`},
		{&locker.Error{Op: "multilock", Key: "a", Err: &locker.Error{Op: "lock", Key: "b", Err: locker.ErrLost}},
			`locker: multilock "a": lock "b": hold lost`},
		{&locker.Error{Op: "unlock", Key: "k", Err: fmt.Errorf("%w: %w", locker.ErrLost, &locker.Error{Op: "hold", Key: "k", Err: errors.New("expired")})},
			`locker: unlock "k": hold lost: expired`},
		{&locker.Error{Op: "close", Err: context.DeadlineExceeded}, `locker: close: context deadline exceeded`},
		{&locker.Error{}, `locker: <nil>`},
		{&locker.Error{Op: "lock", Key: "k"}, `locker: lock "k": <nil>`},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("Error() = %q; want %q", got, c.want)
		}
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
