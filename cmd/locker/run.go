package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
)

// Exit statuses of locker itself. A command that ran exits locker with its
// own status (128+N when a signal N ended it), unless the hold was lost.
const (
	exitUsage    = 64 // bad flags or arguments (sysexits' EX_USAGE)
	exitBackend  = 69 // the backend could not be reached or failed (EX_UNAVAILABLE)
	exitBusy     = 75 // run -n found the key held, or -w timed out (EX_TEMPFAIL: try again later)
	exitLost     = 76 // the hold was lost while the command ran; the command was stopped
	exitNoExec   = 127
	exitHelp     = -1 // -h: help printed, exit 0
	exitFree     = 1  // status: nobody holds the key
	defaultGrace = 10 * time.Second
)

// runConfig is what `locker run` was asked to do.
type runConfig struct {
	common
	nowait bool
	wait   time.Duration
	ttl    time.Duration
	shared bool
	grace  time.Duration
	key    string
	argv   []string
}

const runUsage = "usage: locker run [-url URL] [-connect-timeout d] [-n] [-w timeout] [-ttl d] [-shared] [-grace d] [-v] KEY [--] command [args...]"

func parseRun(args []string, stderr io.Writer) (runConfig, int) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg runConfig
	cfg.register(fs)
	fs.BoolVar(&cfg.nowait, "n", false, "do not wait: exit 75 at once if the key is held")
	fs.DurationVar(&cfg.wait, "w", 0, "give up waiting for the key after this long and exit 75 (0: wait for ever)")
	fs.DurationVar(&cfg.ttl, "ttl", locker.DefaultTTL, "lease TTL: how long the key outlives a crashed locker")
	fs.BoolVar(&cfg.shared, "shared", false, "take a shared (read) hold: shared holders run together")
	fs.DurationVar(&cfg.grace, "grace", defaultGrace, "after a loss, time between SIGTERM and SIGKILL")
	fs.Usage = func() {
		fmt.Fprintln(stderr, runUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, exitHelp
		}
		return cfg, exitUsage
	}
	rest := fs.Args()
	usage := func(msg string) (runConfig, int) {
		fmt.Fprintf(stderr, "locker run: %s\n%s\n", msg, runUsage)
		return cfg, exitUsage
	}
	switch {
	case len(rest) == 0:
		return usage("no KEY")
	case len(rest) > 1 && rest[1] != "--" && strings.HasPrefix(rest[1], "-"):
		return usage(fmt.Sprintf("%s after KEY: flags go before KEY, the command after --", rest[1]))
	}
	cfg.key, rest = rest[0], rest[1:]
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	}
	switch {
	case len(rest) == 0:
		return usage("no command")
	case cfg.ttl <= 0 || cfg.wait < 0 || cfg.grace < 0:
		return usage("-ttl must be positive, -w and -grace not negative")
	}
	if code := cfg.check("run", stderr); code != 0 {
		return cfg, code
	}
	if code := checkKey("run", cfg.key, stderr); code != 0 {
		return cfg, code
	}
	cfg.argv = rest
	return cfg, 0
}

// runCmd is `locker run`: it takes the lock, runs the command while it
// holds it, and stops the command if the hold is lost.
func runCmd(args []string, stderr io.Writer) int {
	cfg, code := parseRun(args, stderr)
	switch code {
	case 0:
	case exitHelp:
		return 0
	default:
		return code
	}
	fail := func(code int, err error) int {
		fmt.Fprintln(stderr, "locker run:", err)
		return code
	}

	// Signals that arrive while waiting for the key end the wait.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waitSig := cancelOnSignal(sigs, cancel)

	d := cfg.dialer(stderr)
	be, in, _, err := d.reach(ctx, cfg.url, cfg.key)
	if err != nil {
		if sig := waitSig(); sig != nil {
			return fail(128+sigNum(sig), fmt.Errorf("%v while reaching the backend", sig))
		}
		return fail(backendExit(err), err)
	}
	defer be.close()
	logger := newLogger(stderr, cfg.verbose)
	c := locker.New(be.drv, locker.WithTTL(cfg.ttl), locker.WithLogger(logger))
	closeWithin := min(cfg.timeout, 5*time.Second)
	defer func() { closeClient(c, closeWithin) }()

	h, release, err := acquireWatched(ctx, c, d, in, cfg)
	if sig := waitSig(); err != nil {
		code, err := acquireFailure(ctx, d, in, cfg, err, sig)
		if code == exitBackend {
			// Close's clean-up cannot reach the backend either; the
			// leases of what it would release run out on their own.
			closeWithin = min(closeWithin, time.Second)
		}
		return fail(code, err)
	}
	logger.Debug("acquired", "key", cfg.key, "token", h.Token())

	cmd := exec.Command(cfg.argv[0], cfg.argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "LOCKER_KEY="+cfg.key, "LOCKER_TOKEN="+strconv.FormatUint(uint64(h.Token()), 10))
	if err := cmd.Start(); err != nil {
		releaseHold(release)
		return fail(exitNoExec, err)
	}
	return supervise(cmd, h, release, sigs, cfg.grace, stderr)
}

// closeClient closes c, releasing what it still holds, for at most
// timeout: a backend gone away does not keep locker from exiting.
func closeClient(c *locker.Client, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_ = c.Close(ctx)
}

// acquireWatched is acquireWithin while d watches the backend: a backend
// that stops answering for d.timeout ends the wait with a *backendError.
func acquireWatched(ctx context.Context, c *locker.Client, d dialer, in driver.Inspector, cfg runConfig) (hold, func(context.Context) error, error) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := d.watch(actx, cancel, in, cfg.url, cfg.key)
	h, release, err := acquireWithin(actx, c, cfg)
	stop()
	if cause := context.Cause(actx); err != nil && errors.As(cause, new(*backendError)) {
		return nil, nil, cause
	}
	return h, release, err
}

// cancelOnSignal calls cancel when a signal arrives on sigs, until the
// returned function is called; that function returns the signal, if one
// arrived.
func cancelOnSignal(sigs <-chan os.Signal, cancel context.CancelFunc) (stop func() os.Signal) {
	var got os.Signal
	waiting := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case s := <-sigs:
			got = s
			cancel()
		case <-waiting:
		}
	}()
	var once sync.Once
	return func() os.Signal {
		once.Do(func() { close(waiting) })
		<-done
		return got
	}
}

// acquireWithin is acquire, waiting at most cfg.wait when it is set.
func acquireWithin(ctx context.Context, c *locker.Client, cfg runConfig) (hold, func(context.Context) error, error) {
	if cfg.wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.wait)
		defer cancel()
	}
	return acquire(ctx, c, cfg)
}

// acquireFailure returns the exit status and message of a failed acquire:
// 75 when the key is held (at once with -n; still, by a last read of its
// state, when -w ran out), 128+n when signal n ended the wait, 69 when
// the backend failed or stopped answering.
func acquireFailure(ctx context.Context, d dialer, in driver.Inspector, cfg runConfig, err error, sig os.Signal) (int, error) {
	switch {
	case errors.Is(err, locker.ErrLocked):
		return exitBusy, fmt.Errorf("%q is held", cfg.key)
	case sig != nil:
		return 128 + sigNum(sig), fmt.Errorf("%v while waiting for %q", sig, cfg.key)
	case errors.As(err, new(*backendError)):
		return exitBackend, err
	case errors.Is(err, locker.ErrInvalidKey), errors.Is(err, locker.ErrInvalidTTL), errors.Is(err, locker.ErrInvalidOption):
		return exitUsage, err
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		// -w ran out: busy only if the backend still answers.
		st, err := d.inspect(ctx, in, cfg.url, cfg.key)
		switch {
		case err != nil:
			return exitBackend, err
		case len(st.Holders) == 0:
			return exitBusy, fmt.Errorf("%q not acquired within %v (free now)", cfg.key, cfg.wait)
		}
		return exitBusy, fmt.Errorf("%q still held after %v", cfg.key, cfg.wait)
	default:
		return exitBackend, unreachable(cfg.url, 0, err)
	}
}

// supervise waits for the started cmd, forwarding the signals that arrive
// on sigs, and stops it (SIGTERM, then SIGKILL after grace) if the hold is
// lost. It releases the hold when the command exits and returns run's exit
// status: the command's, or exitLost when the hold was lost before the
// command ended.
func supervise(cmd *exec.Cmd, h hold, release func(context.Context) error, sigs <-chan os.Signal, grace time.Duration, stderr io.Writer) int {
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	lost := h.Done()
	var kill <-chan time.Time
	var lostErr error
	for {
		select {
		case s := <-sigs:
			_ = cmd.Process.Signal(s)
		case <-lost:
			lost = nil
			lostErr = h.Err()
			fmt.Fprintf(stderr, "locker run: %v; stopping the command (SIGTERM, SIGKILL after %v)\n", lostErr, grace)
			_ = cmd.Process.Signal(syscall.SIGTERM)
			kill = time.After(grace)
		case <-kill:
			kill = nil
			_ = cmd.Process.Kill()
		case err := <-exited:
			if lostErr != nil {
				return exitLost
			}
			if rerr := releaseHold(release); rerr != nil && errors.Is(rerr, locker.ErrLost) {
				// Lost as the command ended: its work was not fully
				// covered by the lock.
				fmt.Fprintln(stderr, "locker run:", rerr)
				return exitLost
			}
			return exitStatus(err)
		}
	}
}

// A hold is what run holds while the command runs: a *locker.Hold, or
// the read side of an RWMutex taken by a try, which has no Hold of its
// own.
type hold interface {
	Token() locker.Token
	Done() <-chan struct{}
	Err() error
}

// acquire takes the key as cfg says. A try that finds it held returns an
// error wrapping locker.ErrLocked.
func acquire(ctx context.Context, c *locker.Client, cfg runConfig) (hold, func(context.Context) error, error) {
	busy := fmt.Errorf("%w", locker.ErrLocked)
	if cfg.shared {
		rw := c.RWMutex(cfg.key)
		if cfg.nowait {
			ok, err := rw.TryRLockContext(ctx)
			switch {
			case err != nil:
				return nil, nil, err
			case !ok:
				return nil, nil, busy
			}
			return rw, rw.RUnlockContext, nil
		}
		h, err := rw.RAcquire(ctx)
		if err != nil {
			return nil, nil, err
		}
		return h, h.Release, nil
	}
	m := c.Mutex(cfg.key)
	var h *locker.Hold
	var err error
	if cfg.nowait {
		h, err = m.TryAcquire(ctx)
	} else {
		h, err = m.Acquire(ctx)
	}
	if err != nil {
		return nil, nil, err
	}
	return h, h.Release, nil
}

func releaseHold(release func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return release(ctx)
}

// exitStatus is locker's exit status for the command's end.
func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return exitNoExec
}

// backendExit is the exit status for err from openBackend.
func backendExit(err error) int {
	if errors.Is(err, errBadURL) {
		return exitUsage
	}
	return exitBackend
}

func sigNum(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return int(n)
	}
	return 1
}
