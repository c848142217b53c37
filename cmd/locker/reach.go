package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
)

// defaultConnectTimeout is the default of -connect-timeout.
const defaultConnectTimeout = 10 * time.Second

// common are the flags that run, status and release share.
type common struct {
	url     string
	timeout time.Duration
	verbose bool
}

// register defines the common flags on fs.
func (c *common) register(fs *flag.FlagSet) {
	// The default is not $LOCKER_URL itself: the flag package prints
	// defaults in usage messages, and the URL may hold a password.
	fs.StringVar(&c.url, "url", "", "backend `URL` (default: $LOCKER_URL; see locker -h)")
	fs.DurationVar(&c.timeout, "connect-timeout", defaultConnectTimeout, "exit 69 if the backend does not answer within this long")
	fs.BoolVar(&c.verbose, "v", false, "log the lock's progress and the client libraries' own logs to stderr")
}

// check completes the common flags after parsing: the URL from
// $LOCKER_URL when -url was not given. It prints what is wrong and
// returns exitUsage, or 0.
func (c *common) check(name string, stderr io.Writer) int {
	if c.url == "" {
		c.url = os.Getenv("LOCKER_URL")
	}
	switch {
	case c.url == "":
		fmt.Fprintf(stderr, "locker %s: %v\n", name, errNoURL)
		return exitUsage
	case c.timeout <= 0:
		fmt.Fprintf(stderr, "locker %s: -connect-timeout %v is not positive\n", name, c.timeout)
		return exitUsage
	}
	return 0
}

// checkKey refuses the keys that no driver accepts (see locker.MaxKeyLen)
// before any backend is reached: a usage error, not a backend's.
func checkKey(name, key string, stderr io.Writer) int {
	msg := ""
	switch {
	case key == "":
		msg = "empty KEY"
	case len(key) > locker.MaxKeyLen:
		msg = fmt.Sprintf("KEY of %d bytes, more than the maximum of %d", len(key), locker.MaxKeyLen)
	case !utf8.ValidString(key) || strings.IndexByte(key, 0) >= 0:
		msg = fmt.Sprintf("KEY %q is not valid UTF-8 without NUL", key)
	default:
		return 0
	}
	fmt.Fprintf(stderr, "locker %s: %s\n", name, msg)
	return exitUsage
}

// dialer returns the dialer of the common flags; the client libraries
// log to stderr when verbose.
func (c *common) dialer(stderr io.Writer) dialer {
	libraryLogs(stderr, c.verbose)
	return dialer{timeout: c.timeout, verbose: c.verbose, log: stderr}
}

// A backendError is a backend that could not be reached or failed: exit
// status 69. Its message names the backend by its URL without password.
type backendError struct {
	url     string
	timeout time.Duration // the time allowed, when it ran out
	err     error
}

// Error says which backend failed and how: "no answer within" when the
// time allowed ran out.
func (e *backendError) Error() string {
	msg := oneLine(e.err.Error())
	if e.timeout > 0 {
		// What follows is the driver's account of the abandoned request.
		const deadline = "context deadline exceeded"
		if i := strings.Index(msg, deadline); i >= 0 {
			msg = msg[:i+len(deadline)]
		}
		return fmt.Sprintf("backend %s: no answer within %v (%s)", e.url, e.timeout, msg)
	}
	return fmt.Sprintf("backend %s: %s", e.url, msg)
}

// Unwrap returns the backend's error.
func (e *backendError) Unwrap() error { return e.err }

// unreachable wraps err, an error of the backend of rawURL seen by a call
// that was allowed timeout, as a *backendError.
func unreachable(rawURL string, timeout time.Duration, err error) error {
	if be := (*backendError)(nil); errors.As(err, &be) {
		return err
	}
	e := &backendError{url: "(bad URL)", err: err}
	if u, perr := url.Parse(rawURL); perr == nil {
		e.url = redact(u)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		e.timeout = timeout
	}
	return e
}

// oneLine joins the lines of a multi-line message (pgx lists each address
// it tried on a line of its own).
func oneLine(s string) string {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	for i, f := range fields {
		fields[i] = strings.TrimSpace(f)
	}
	return strings.Join(fields, " ")
}

// reach opens the backend of rawURL and reads the state of key there: the
// backend's first answer, within d.timeout. A backend that does not
// answer in time, or answers with an error, is a *backendError.
func (d dialer) reach(ctx context.Context, rawURL, key string) (*backend, driver.Inspector, driver.KeyState, error) {
	be, err := d.open(ctx, rawURL)
	if err != nil {
		if errors.Is(err, errBadURL) {
			return nil, nil, driver.KeyState{}, err
		}
		return nil, nil, driver.KeyState{}, unreachable(rawURL, d.timeout, err)
	}
	in, ok := be.drv.(driver.Inspector)
	if !ok || !driver.CapabilitiesOf(be.drv).Inspect {
		_ = be.close()
		return nil, nil, driver.KeyState{}, fmt.Errorf("driver %T cannot inspect keys", be.drv)
	}
	st, err := d.inspect(ctx, in, rawURL, key)
	if err != nil {
		_ = be.close()
		return nil, nil, driver.KeyState{}, err
	}
	return be, in, st, nil
}

// inspect reads the state of key within d.timeout.
func (d dialer) inspect(ctx context.Context, in driver.Inspector, rawURL, key string) (driver.KeyState, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	st, err := in.Inspect(ctx, key)
	if err != nil {
		return st, unreachable(rawURL, d.timeout, err)
	}
	return st, nil
}

// watch reads the state of key every half timeout (and every half second
// after a failure) while ctx lasts, and cancels ctx with a *backendError
// as its cause once no read has succeeded for timeout: a backend that
// goes away while `locker run` waits for the key ends the wait with exit
// status 69 rather than hanging or being taken for a busy key. The
// returned function stops the watch and waits for it to end.
func (d dialer) watch(ctx context.Context, cancel context.CancelCauseFunc, in driver.Inspector, rawURL, key string) (stop func()) {
	ctx, stopWatch := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lastOK := time.Now()
		wait := d.timeout / 2
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			_, err := d.inspect(ctx, in, rawURL, key)
			switch {
			case ctx.Err() != nil:
				return
			case err == nil:
				lastOK, wait = time.Now(), d.timeout/2
			case time.Since(lastOK) >= d.timeout:
				cancel(err)
				return
			default:
				wait = min(d.timeout/2, 500*time.Millisecond)
				if d.verbose {
					fmt.Fprintf(d.log, "locker: reading %q failed, no answer for %v: %v\n", key, time.Since(lastOK).Round(time.Millisecond), err)
				}
			}
		}
	}()
	return func() { stopWatch(); <-done }
}
