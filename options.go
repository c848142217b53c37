package locker

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/go-locker/locker/driver"
)

// Default option values.
const (
	// DefaultTTL is the lease length used without WithTTL.
	DefaultTTL = 15 * time.Second
	// MinTTL is the shortest TTL that WithTTL accepts, on every driver:
	// the shortest lease the watchdog can keep with its full safety
	// margin. The margin (see "Guarantees" in the package documentation)
	// is how much earlier than the backend's expiry a hold's local
	// deadline comes, and absorbs timer and scheduling delays of the
	// holder; it is max(TTL/10, min(20ms, TTL/4)), so below 80ms it
	// shrinks with the TTL, down to half a millisecond at 2ms, which a
	// busy process overruns. At MinTTL the margin is 20ms, and a renewal,
	// sent a third of the TTL after the last confirmed one, has 33ms to
	// come back. A shorter TTL fails the first lock call with an error
	// wrapping ErrInvalidTTL that names this limit. SAFETY.md records how
	// shorter TTLs fared.
	MinTTL = 80 * time.Millisecond
	// DefaultMinBackoff is the shortest delay between attempts used
	// without WithBackoff.
	DefaultMinBackoff = 1 * time.Millisecond
	// DefaultMaxBackoff is the longest delay between attempts used without
	// WithBackoff.
	DefaultMaxBackoff = 250 * time.Millisecond
	// DefaultFairnessThreshold is how long a waiter waits before it joins
	// the backend's wait queue (drivers that report Queue in their
	// driver.Capabilities). Like
	// sync.Mutex's starvation mode, waiters that have waited longer than
	// this are served in order, and newcomers may no longer overtake them.
	DefaultFairnessThreshold = 1 * time.Millisecond
	// DefaultTryTimeout bounds TryLock and TryRLock (of Mutex, RWMutex
	// and MultiLock), which take no context, when the backend does not
	// answer.
	DefaultTryTimeout = 1 * time.Second
)

// An Option configures a Client (New: the defaults of every handle made
// from it) or one lock handle (Client.Mutex and the other constructors:
// applied after the Client's). The options of NewMutex, NewRWMutex and
// NewReentrantMutex are their handle's only ones, every option included:
// those handles share their driver's default Client, which has none.
type Option func(*config)

type config struct {
	ttl        time.Duration
	renew      time.Duration // 0: ttl/3
	fixed      bool
	minHold    time.Duration // WithMinHold; 0: none
	minBackoff time.Duration
	maxBackoff time.Duration
	fairAfter  time.Duration
	tryTimeout time.Duration
	onLost     func(error)
	onError    func(error)
	logger     *slog.Logger
	observer   *Observer
	badOption  error
}

func newConfig(opts []Option) config {
	c := config{
		ttl:        DefaultTTL,
		minBackoff: DefaultMinBackoff,
		maxBackoff: DefaultMaxBackoff,
		fairAfter:  DefaultFairnessThreshold,
		tryTimeout: DefaultTryTimeout,
	}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// WithTTL sets the lease length. While a lock is held its lease is renewed
// in the background, so the TTL bounds how long a lock outlives a crashed
// holder, not how long it may be held. It must be at least MinTTL (80ms)
// and within the driver's limits. The default is DefaultTTL (15s).
func WithTTL(ttl time.Duration) Option { return func(c *config) { c.ttl = ttl } }

// WithRenewInterval sets how often the watchdog renews a held lease. It
// must be positive and shorter than the TTL minus the safety margin. The
// default is a third of the TTL.
func WithRenewInterval(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.badOption = fmt.Errorf("%w: renew interval %v is not positive", ErrInvalidOption, d)
		}
		c.renew = d
	}
}

// WithFixedLease turns the watchdog off: a hold ends at its TTL (WithTTL)
// unless Hold.Refresh extends it, as with a lock that has a lease time
// and no renewal. The end is a loss like any other (Done closes, Err wraps
// ErrLost), declared at the local deadline, before the backend can grant
// the key to anyone else.
func WithFixedLease() Option { return func(c *config) { c.fixed = true } }

// WithTryTimeout bounds TryLock and TryRLock (of Mutex, RWMutex and
// MultiLock), which take no context, when the backend does not answer. It must be positive; the default is
// DefaultTryTimeout.
func WithTryTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.badOption = fmt.Errorf("%w: try timeout %v is not positive", ErrInvalidOption, d)
		}
		c.tryTimeout = d
	}
}

// WithBackoff sets the shortest and longest delay between attempts while
// waiting without a backend notification, and between retries of transient
// errors. Each delay is also capped by the holder's remaining lease when the
// driver reports it. The defaults are DefaultMinBackoff and
// DefaultMaxBackoff.
func WithBackoff(min, max time.Duration) Option {
	return func(c *config) {
		if min <= 0 || max < min {
			c.badOption = fmt.Errorf("%w: backoff [%v, %v] is not a positive range", ErrInvalidOption, min, max)
		}
		c.minBackoff, c.maxBackoff = min, max
	}
}

// WithFairnessThreshold sets how long a waiter waits before it asks the
// backend for a place in its wait queue (see DefaultFairnessThreshold). A
// negative value disables the queue: waiters then barge, as in polling
// lock libraries. It has no effect on drivers without a wait queue
// (driver.Capabilities.Queue).
func WithFairnessThreshold(d time.Duration) Option { return func(c *config) { c.fairAfter = d } }

// WithOnLost sets a function called, in a goroutine of its own, with the
// reason when a hold is lost. Loss is also visible through Done and Err
// and through the error of the next Unlock.
func WithOnLost(f func(err error)) Option { return func(c *config) { c.onLost = f } }

// WithErrorHandler sets the function that receives errors that no call can
// return: backend errors from Unlock and TryLock, failed renewals (each one,
// before a loss), transient errors retried by Lock, and failed background
// cleanups. f receives every one of them, as the Observer's Error does.
//
// The default handler logs them to the logger (WithLogger) at level Warn,
// a run of them at a time: during a backend outage every waiting lock call
// retries and every hold's renewal fails, so the default handler of a
// Client logs the first error of a run at once, then at most one line
// every 5 seconds (the latest error, with the number of those not logged),
// and, when the backend answers again (a grant, a refusal, a confirmed
// renewal), one line at level Info with the run's count and length. A
// run of one error ends without that line.
func WithErrorHandler(f func(err error)) Option { return func(c *config) { c.onError = f } }

// WithLogger sets the logger of the default error handler (see
// WithErrorHandler). The default is slog.Default() at the time of the
// report.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// reportError hands err to the error handler of cfg (WithErrorHandler),
// after its Observer's Error. Without a handler of its own, err goes to
// the default handler of c, which logs runs of errors a line at a time
// (errorLog), or, without a Client (a nil c), to the logger at once.
func (c *Client) reportError(cfg *config, err error) {
	if obs := cfg.observer; obs != nil && obs.Error != nil {
		obs.Error(err)
	}
	switch {
	case cfg.onError != nil:
		cfg.onError(err)
	case c != nil:
		c.errs.report(cfg.logger, err)
	default:
		logger(cfg.logger).Warn("locker", "err", err)
	}
}

// margin is the safety margin subtracted from the TTL when computing the
// local deadline: it absorbs the difference between the client's and the
// server's clock rates and timer latency.
func margin(ttl time.Duration) time.Duration {
	m := ttl / 10
	if floor := min(20*time.Millisecond, ttl/4); m < floor {
		m = floor
	}
	return m
}

func (c *config) renewInterval(ttl time.Duration) time.Duration {
	if c.renew > 0 {
		return c.renew
	}
	return ttl / 3
}

// validate checks the options against the driver's limits.
func (c *config) validate(d driver.Driver) error {
	if c.badOption != nil {
		return c.badOption
	}
	if c.ttl <= 0 {
		return fmt.Errorf("%w: %v is not positive", ErrInvalidTTL, c.ttl)
	}
	caps := driver.CapabilitiesOf(d)
	if c.ttl < caps.MinTTL && caps.MinTTL >= MinTTL {
		return fmt.Errorf("%w: %v is below the driver's minimum of %v", ErrInvalidTTL, c.ttl, caps.MinTTL)
	}
	if caps.MaxTTL > 0 && c.ttl > caps.MaxTTL {
		if caps.MaxTTLSource != "" {
			return fmt.Errorf("%w: %v is above the driver's maximum of %v, %s: use a TTL of at most %v (WithTTL), or raise %s to at least %v", ErrInvalidTTL, c.ttl, caps.MaxTTL, caps.MaxTTLSource, caps.MaxTTL, caps.MaxTTLSource, c.ttl)
		}
		return fmt.Errorf("%w: %v is above the driver's maximum of %v: use a TTL of at most %v (WithTTL)", ErrInvalidTTL, c.ttl, caps.MaxTTL, caps.MaxTTL)
	}
	if u := caps.TTLUnit; u > 0 && c.ttl%u != 0 {
		return fmt.Errorf("%w: %v is not a whole number of the driver's TTL unit %v: %s", ErrInvalidTTL, c.ttl, u, ttlHint(c.ttl, caps))
	}
	if c.ttl < MinTTL { // also below a driver's minimum shorter than MinTTL
		return fmt.Errorf("%w: %v is below locker.MinTTL, %v, the shortest lease the watchdog can keep", ErrInvalidTTL, c.ttl, MinTTL)
	}
	if err := c.validateMinHold(); err != nil {
		return err
	}
	if c.renew > 0 && c.renew >= c.ttl-margin(c.ttl) {
		return fmt.Errorf("%w: renew interval %v is not shorter than TTL %v minus the safety margin %v", ErrInvalidOption, c.renew, c.ttl, margin(c.ttl))
	}
	return nil
}

// ttlHint suggests the TTLs next to ttl that caps accept, for a ttl that is
// not a whole number of caps.TTLUnit.
func ttlHint(ttl time.Duration, caps driver.Capabilities) string {
	lo := ttl.Truncate(caps.TTLUnit)
	if lo <= 0 || lo < caps.MinTTL {
		return fmt.Sprintf("use %v or more", max(caps.MinTTL, lo+caps.TTLUnit))
	}
	return fmt.Sprintf("use %v or %v", lo, lo+caps.TTLUnit)
}
