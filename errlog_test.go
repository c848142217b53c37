//go:build go1.25

package locker_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/memdriver"
)

// lineCounter is a slog.Handler that keeps the records it is given.
type lineCounter struct {
	mu      sync.Mutex
	records []slog.Record
}

func (lc *lineCounter) Enabled(context.Context, slog.Level) bool { return true }
func (lc *lineCounter) WithAttrs([]slog.Attr) slog.Handler       { return lc }
func (lc *lineCounter) WithGroup(string) slog.Handler            { return lc }
func (lc *lineCounter) Handle(_ context.Context, r slog.Record) error {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	lc.records = append(lc.records, r.Clone())
	return nil
}

func (lc *lineCounter) lines() []slog.Record {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return append([]slog.Record(nil), lc.records...)
}

// attr returns the value of r's attribute key.
func attr(r slog.Record, key string) (v slog.Value) {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value
			return false
		}
		return true
	})
	return v
}

// outage runs, in a synctest bubble, the scenario of a backend outage of
// 30s in a process (the Client made with opts, on a driver of its own)
// with 100 lock calls waiting for keys that another process holds, and 5
// holds of its own, whose renewals fail until they are lost. It returns
// when the backend has answered again and every waiter has its key, and
// reports the number of errors the Observer saw during the outage, and in
// all.
func outage(t *testing.T, opts ...locker.Option) (observed, total int64) {
	const waiters, holds, down = 100, 5, 30 * time.Second
	b := memdriver.NewBackend()
	other := locker.New(b.Driver())
	defer other.Close(context.Background())
	var theirs []*locker.Mutex
	for i := range waiters {
		m := other.Mutex(fmt.Sprint("job/", i))
		m.Lock()
		theirs = append(theirs, m)
	}

	var errs atomic.Int64
	obs := &locker.Observer{Error: func(error) { errs.Add(1) }}
	d := b.Driver()
	c := locker.New(d, append(opts, locker.WithObserver(obs))...)
	defer c.Close(context.Background())
	for i := range holds {
		c.Mutex(fmt.Sprint("mine/", i)).Lock()
	}

	d.FailNext(1<<30, nil) // the backend is unreachable: every call fails at once
	var wg sync.WaitGroup
	for i := range waiters {
		m := c.Mutex(fmt.Sprint("job/", i))
		wg.Go(func() {
			m.Lock()
			m.Unlock()
		})
	}
	time.Sleep(down)
	observed = errs.Load()
	d.FailNext(0, nil) // back
	time.Sleep(time.Second)
	for _, m := range theirs {
		m.Unlock()
	}
	wg.Wait()
	return observed, errs.Load()
}

// TestDefaultErrorHandler_Outage: during a 30s outage with 100 waiting
// lock calls and 5 holds in a process, the default error handler writes
// one line at the start, about one per 5s after, and one when the backend
// is back, while the Observer sees every error.
func TestDefaultErrorHandler_Outage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lc := &lineCounter{}
		start := time.Now()
		observed, _ := outage(t, locker.WithLogger(slog.New(lc)))
		lines := lc.lines()
		var during, after []slog.Record
		for _, r := range lines {
			if r.Time.Sub(start) < 30*time.Second {
				during = append(during, r)
			} else {
				after = append(after, r)
			}
		}
		t.Logf("%d errors in the outage; %d lines during it, %d after", observed, len(during), len(after))
		for _, r := range lines {
			t.Logf("  +%v %v %q err=%v suppressed=%v errors=%v", r.Time.Sub(start), r.Level, r.Message, attr(r, "err"), attr(r, "suppressed"), attr(r, "errors"))
		}
		if observed < 1000 {
			t.Fatalf("the Observer saw %d errors in the outage; the scenario makes thousands", observed)
		}
		// One at the start, then one per 5s: 7 in 30s.
		if len(during) < 2 || len(during) > 7 {
			t.Errorf("%d lines during a 30s outage, want one at its start and about one per 5s", len(during))
		}
		for _, r := range during {
			if r.Level != slog.LevelWarn {
				t.Errorf("line during the outage at level %v, want Warn", r.Level)
			}
		}
		if len(after) != 1 {
			t.Fatalf("%d lines once the backend answers again, want 1", len(after))
		}
		back := after[0]
		if n := attr(back, "errors"); back.Level != slog.LevelInfo || n.Kind() != slog.KindInt64 || n.Int64() != observed {
			t.Errorf("last line %v %q errors=%v, want Info with the %d errors of the outage", back.Level, back.Message, attr(back, "errors"), observed)
		}
		// The lines account for every error.
		var logged int64
		for _, r := range append(during, back) {
			if v := attr(r, "suppressed"); v.Kind() == slog.KindInt64 {
				logged += v.Int64()
			}
		}
		logged += int64(len(during))
		if logged != observed {
			t.Errorf("the lines account for %d errors, the Observer saw %d", logged, observed)
		}
	})
}

// TestErrorHandler_OutageEveryError: a handler of one's own receives every
// error of an outage, as the Observer does, and nothing is logged.
func TestErrorHandler_OutageEveryError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lc := &lineCounter{}
		var handled atomic.Int64
		observed, total := outage(t, locker.WithLogger(slog.New(lc)),
			locker.WithErrorHandler(func(error) { handled.Add(1) }))
		if observed < 1000 {
			t.Fatalf("the Observer saw %d errors in the outage; the scenario makes thousands", observed)
		}
		if got := handled.Load(); got != total {
			t.Errorf("the handler received %d errors, the Observer %d", got, total)
		}
		if n := len(lc.lines()); n != 0 {
			t.Errorf("%d lines logged with an error handler of one's own, want none", n)
		}
	})
}

// TestDefaultErrorHandler_OneError: a single error, followed by an
// answer of the backend, is one line, without a line for the recovery.
func TestDefaultErrorHandler_OneError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lc := &lineCounter{}
		d := memdriver.New()
		c := locker.New(d, locker.WithLogger(slog.New(lc)))
		defer c.Close(context.Background())
		d.FailNext(1, nil)
		m := c.Mutex("k")
		m.Lock() // retried once, then granted
		m.Unlock()
		lines := lc.lines()
		if len(lines) != 1 || lines[0].Level != slog.LevelWarn {
			t.Fatalf("%d lines for one retried error, want one Warn", len(lines))
		}
		// A second run of errors later starts with a line of its own.
		time.Sleep(time.Second)
		d.FailNext(1, nil)
		m.Lock()
		m.Unlock()
		if n := len(lc.lines()); n != 2 {
			t.Errorf("%d lines after a second error, want 2", n)
		}
	})
}

// TestDefaultErrorHandler_OutageNewMutex: handles of NewMutex share their
// driver's default Client, and so its run of errors: 100 of them waiting
// through a 30s outage make a few lines.
func TestDefaultErrorHandler_OutageNewMutex(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lc := &lineCounter{}
		log := locker.WithLogger(slog.New(lc))
		b := memdriver.NewBackend()
		other := locker.New(b.Driver())
		defer other.Close(context.Background())
		var theirs []*locker.Mutex
		for i := range 100 {
			m := other.Mutex(fmt.Sprint("job/", i))
			m.Lock()
			theirs = append(theirs, m)
		}
		d := b.Driver()
		d.FailNext(1<<30, nil)
		var wg sync.WaitGroup
		for i := range 100 {
			m := locker.NewMutex(d, fmt.Sprint("job/", i), log)
			wg.Go(func() {
				m.Lock()
				m.Unlock()
			})
		}
		time.Sleep(30 * time.Second)
		d.FailNext(0, nil)
		for _, m := range theirs {
			m.Unlock()
		}
		wg.Wait()
		lines := lc.lines()
		t.Logf("%d lines", len(lines))
		if len(lines) < 2 || len(lines) > 8 {
			t.Errorf("%d lines for 100 NewMutex handles waiting through a 30s outage, want one at its start, about one per 5s, one at its end", len(lines))
		}
	})
}
