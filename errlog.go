package locker

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// errorLogEvery is how often, at most, the default error handler of a
// Client logs while errors go on: once the first error of a run of errors
// is logged, the next are counted and logged, the latest with the count,
// no sooner than this after the previous line.
const errorLogEvery = 5 * time.Second

// An errorLog is the default error handler of one Client (WithErrorHandler
// unset), shared by all its handles: it turns a run of errors, such as the
// retries of every waiting lock call and the failed renewals of every hold
// during a backend outage, into one line every errorLogEvery, and one line
// when the backend answers again.
//
// A run starts with an error and ends when the backend next answers a
// request (a grant, a refusal, a confirmed renewal; see answered). A run
// of one error ends silently: its line said it all.
type errorLog struct {
	inRun atomic.Bool // read without mu by answered, on every grant

	mu       sync.Mutex
	start    time.Time // the first error of the run
	lastLine time.Time
	errs     int   // in the run
	held     int   // errors of the run not logged since lastLine
	latest   error // the latest of them
	logger   *slog.Logger
}

// report handles err for a config without an error handler of its own.
// It logs outside el.mu, so that a slow handler does not hold up the
// other reporters, which only count.
func (el *errorLog) report(l *slog.Logger, err error) {
	now := time.Now()
	el.mu.Lock()
	if !el.inRun.Load() {
		el.inRun.Store(true)
		el.start, el.lastLine, el.errs, el.held, el.latest, el.logger = now, now, 1, 0, nil, l
		el.mu.Unlock()
		logger(l).Warn("locker", "err", err)
		return
	}
	el.errs++
	if now.Sub(el.lastLine) < errorLogEvery {
		el.held++
		el.latest = err
		el.mu.Unlock()
		return
	}
	held, since := el.held, now.Sub(el.start).Round(time.Millisecond)
	el.lastLine, el.held, el.latest = now, 0, nil
	el.mu.Unlock()
	logger(l).Warn("locker", "err", err, "suppressed", held, "since", since)
}

// answered records an answer of the backend: it ends a run of errors, and
// logs its end if the run had more than one error. It costs one atomic
// load outside of runs.
func (el *errorLog) answered() {
	if el == nil || !el.inRun.Load() {
		return
	}
	now := time.Now()
	el.mu.Lock()
	if !el.inRun.Load() {
		el.mu.Unlock()
		return
	}
	el.inRun.Store(false)
	l, errs := el.logger, el.errs
	args := []any{"errors", errs, "for", now.Sub(el.start).Round(time.Millisecond)}
	if el.latest != nil {
		args = append(args, "suppressed", el.held, "last_err", el.latest)
	}
	el.latest, el.logger = nil, nil
	el.mu.Unlock()
	if errs > 1 {
		logger(l).Info("locker: the backend answers again", args...)
	}
}

// logger returns l, or slog.Default() at the time of the call for nil.
func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}
