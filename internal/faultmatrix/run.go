package faultmatrix

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/internal/faultproxy"
)

const (
	// EnvIterations names the environment variable that sets how many
	// times each cell runs (default 3), for a longer pass than CI's.
	EnvIterations = "LOCKER_FAULT_ITERATIONS"
	// EnvReport names the environment variable that names a file to which
	// every cell appends its markdown table row.
	EnvReport = "LOCKER_FAULT_REPORT"
)

// iterations returns how many times each cell runs.
func iterations() int {
	if n, err := strconv.Atoi(os.Getenv(EnvIterations)); err == nil && n > 0 {
		return n
	}
	return 3
}

// A cell is one fault of the matrix.
type cell struct {
	name  string
	modes string // the failure modes of reliability.md (b) it covers
	// needs returns why tg cannot run the cell, or "".
	needs func(tg Target) string
	// run runs one iteration; it records the history in e.r.
	run func(e *env)
	// mayLoseData marks the cell whose fault may lose the server's data
	// (a restart): its history is checked per epoch unless the target's
	// tokens are durable.
	mayLoseData bool
}

// env is one iteration of a cell.
type env struct {
	t   *testing.T
	tg  Target
	r   *rec
	key string
	ttl time.Duration
}

// margin is the front-end's safety margin for e.ttl (see locker's
// options.go): the local deadline is the send time of the last confirmed
// renewal plus TTL minus it.
func (e *env) margin() time.Duration {
	return max(e.ttl/10, min(20*time.Millisecond, e.ttl/4))
}

// renew is the front-end's renewal interval.
func (e *env) renew() time.Duration { return e.ttl / 3 }

// long bounds waits that must end unless something is broken.
func (e *env) long() time.Duration { return 10*e.ttl + 10*time.Second }

// opts returns the options of every handle.
func (e *env) opts() []locker.Option {
	handler := func(error) {}
	if os.Getenv("LOCKER_FAULT_DEBUG") != "" {
		handler = func(err error) { e.t.Logf("%v: %v", now(), err) }
	}
	return append([]locker.Option{locker.WithTTL(e.ttl), locker.WithErrorHandler(handler)}, e.tg.Options...)
}

// client returns a new client, closed at the end of the iteration.
func (e *env) client() Client {
	if e.tg.NewClient != nil {
		return e.tg.NewClient(e.t)
	}
	p, err := faultproxy.New(e.tg.Addr())
	if err != nil {
		e.t.Fatalf("faultproxy: %v", err)
	}
	e.t.Cleanup(func() { _ = p.Close() })
	d, closeFn, err := e.tg.Dial(p.Addr())
	if err != nil {
		e.t.Fatalf("dial %s: %v", e.tg.Name, err)
	}
	e.t.Cleanup(func() { _ = closeFn() })
	return Client{Driver: d, Net: e.proxyNet(p)}
}

// proxyNet returns the Net of a client or helper child behind p.
func (e *env) proxyNet(p *faultproxy.Proxy) Net {
	if e.tg.Net != nil {
		return e.tg.Net(p)
	}
	return p
}

// actor returns an actor with id that locks e.key with a new Mutex on c.
func (e *env) actor(id int, c Client) *actor {
	return &actor{r: e.r, id: id, l: mutexL{locker.NewMutex(c.Driver, e.key, e.opts()...)}}
}

// ctx returns a context that ends after d, canceled at the end of the
// iteration.
func (e *env) ctx(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	e.t.Cleanup(cancel)
	return ctx
}

// mustLock locks a or ends the iteration.
func (e *env) mustLock(a *actor) *held {
	e.t.Helper()
	hd, err := a.lock(e.ctx(e.long()))
	if err != nil {
		e.t.Fatalf("client %d: lock: %v", a.id, err)
	}
	return hd
}

// violation reports a broken rule of the contract.
func (e *env) violation(format string, args ...any) {
	e.t.Helper()
	e.r.mu.Lock()
	e.r.violations++
	e.r.mu.Unlock()
	e.t.Errorf("VIOLATION: "+format, args...)
}

// result is a cell's figures over its iterations.
type result struct {
	target, cell, modes string
	iterations          int
	violations          int
	headroom            []time.Duration
	notes               []string
	skipped             string
}

var reportMu sync.Mutex

// row returns the result as a markdown table row: target, cell, failure
// modes, iterations, violations, headroom p50 / p99, notes.
func (res *result) row() string {
	if res.skipped != "" {
		return fmt.Sprintf("| %s | %s | %s | skipped | – | – | %s |", res.target, res.cell, res.modes, res.skipped)
	}
	hr := "–"
	if len(res.headroom) > 0 {
		hs := slices.Clone(res.headroom)
		slices.Sort(hs)
		q := func(p float64) time.Duration { return hs[min(len(hs)-1, int(p*float64(len(hs))))] }
		hr = fmt.Sprintf("%v / %v", q(0.5).Round(time.Millisecond), q(0.99).Round(time.Millisecond))
	}
	// Each note once, with the number of iterations that made it.
	count := map[string]int{}
	for _, n := range res.notes {
		count[n]++
	}
	var notes []string
	for _, n := range slices.Sorted(maps.Keys(count)) {
		notes = append(notes, fmt.Sprintf("%s (%d of %d)", n, count[n], res.iterations))
	}
	return fmt.Sprintf("| %s | %s | %s | %d | %d | %s | %s |", res.target, res.cell, res.modes, res.iterations, res.violations, hr, strings.Join(notes, "; "))
}

// report logs the row and appends it to the EnvReport file.
func (res *result) report(t *testing.T) {
	row := res.row()
	t.Log(row)
	name := os.Getenv(EnvReport)
	if name == "" {
		return
	}
	reportMu.Lock()
	defer reportMu.Unlock()
	f, err := os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Errorf("report: %v", err)
		return
	}
	defer f.Close()
	if _, err := fmt.Fprintln(f, row); err != nil {
		t.Errorf("report: %v", err)
	}
}

func run(t *testing.T, tg Target) {
	if tg.TTL <= 0 {
		t.Fatalf("faultmatrix: target %q has no TTL", tg.Name)
	}
	if tg.NewClient == nil && (tg.Addr == nil || tg.Dial == nil) {
		t.Fatalf("faultmatrix: target %q has neither NewClient nor Addr and Dial", tg.Name)
	}
	for _, c := range cells {
		t.Run(c.name, func(t *testing.T) {
			res := &result{target: tg.Name, cell: c.name, modes: c.modes}
			defer res.report(t)
			if why := c.needs(tg); why != "" {
				res.skipped = why
				t.Skip(why)
			}
			n := iterations()
			for i := range n {
				r := &rec{}
				t.Run(strconv.Itoa(i), func(t *testing.T) {
					e := &env{t: t, tg: tg, r: r, ttl: tg.TTL,
						key: fmt.Sprintf("faultmatrix/%s/%d/%d", c.name, i, time.Now().UnixNano())}
					c.run(e)
					if t.Failed() && !t.Skipped() {
						return
					}
					durable := tg.DurableTokens || !c.mayLoseData
					for _, err := range r.check(durable) {
						e.violation("%v", err)
					}
				})
				res.iterations++
				res.headroom = append(res.headroom, r.headroom...)
				res.notes = append(res.notes, slices.Compact(slices.Sorted(slices.Values(r.notes)))...) // once per iteration
				res.violations += r.violations
				if r.skipped != "" {
					res.skipped = r.skipped
					res.iterations = 0
					return
				}
			}
		})
	}
}

// always is the needs of cells that every target can run.
func always(Target) string { return "" }

// needsServer returns the needs of cells that need the server controls
// that f picks.
func needsServer(what string, f func(Server) bool) func(Target) string {
	return func(tg Target) string {
		if f(tg.Server) {
			return ""
		}
		return "the target cannot " + what + " its server"
	}
}

// needsChildren is the needs of cells that run helper child processes.
func needsChildren(tg Target) string {
	if tg.Addr == nil || tg.Dial == nil {
		return "helper child processes need Target.Addr and Target.Dial (an in-process backend has no server to share between processes)"
	}
	return ""
}
