// Package drivertest holds the helpers that the tests of locker's own
// driver packages share: fresh owners and keys, a context bounded for a
// test, and a checked TryAcquire. (Third-party drivers use lockertest.)
package drivertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/internal/faultproxy"
	"github.com/go-locker/locker/internal/lag"
	"github.com/go-locker/locker/internal/testflag"
)

// Owner returns a fresh owner string of 32 hex digits.
func Owner() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

var keySeq atomic.Uint64

// UniqueKey returns a lock key that no other test on a shared server
// uses: tb's name, name, the time of day to the nanosecond and a letter
// from a counter.
func UniqueKey(tb testing.TB, name string) string {
	return tb.Name() + "/" + name + "#" + time.Now().Format("150405.000000000") + "-" +
		string(rune('a'+keySeq.Add(1)%26))
}

// Context returns a context that ends after timeout or when tb ends.
func Context(tb testing.TB, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	tb.Cleanup(cancel)
	return ctx
}

// Long skips tb in the quick configuration (see package testflag),
// saying why it is long ("the fault matrix runs for minutes"): it runs
// with LOCKER_LONG=1, as CI does.
func Long(tb testing.TB, why string) {
	tb.Helper()
	if !testflag.Long() {
		tb.Skip(why + "; runs with " + testflag.EnvLong + "=1")
	}
}

// MustAcquire calls d.TryAcquire(ctx, r) and fails tb unless it granted a
// lease with a token and r's key, owner and mode, and, when ttl is not 0,
// a TTL of ttl.
func MustAcquire(ctx context.Context, tb testing.TB, d driver.Driver, r driver.Request, ttl time.Duration) driver.Lease {
	tb.Helper()
	l, err := d.TryAcquire(ctx, r)
	if err != nil {
		tb.Fatalf("TryAcquire(%q, %s, %v): %v", r.Key, r.Mode, r.TTL, err)
	}
	if l.Token == 0 || l.Key != r.Key || l.Owner != r.Owner || l.Mode != r.Mode || (ttl != 0 && l.TTL != ttl) {
		tb.Fatalf("TryAcquire(%+v) = %+v", r, l)
	}
	return l
}

// Acquired is what an Acquire returned.
type Acquired struct {
	Lease driver.Lease
	Err   error
}

// AcquireAsync runs a.Acquire(ctx, r) in a goroutine and returns the
// channel that receives its result.
func AcquireAsync(ctx context.Context, a driver.Acquirer, r driver.Request) <-chan Acquired {
	c := make(chan Acquired, 1)
	go func() {
		l, err := a.Acquire(ctx, r)
		c <- Acquired{l, err}
	}()
	return c
}

// WantWaiting fails tb if c already has the result of its Acquire, which
// must still be waiting; why says what should keep it waiting ("while the
// key is held").
func WantWaiting(tb testing.TB, c <-chan Acquired, why string) {
	tb.Helper()
	select {
	case g := <-c:
		tb.Fatalf("a waiter returned %+v, %v %s", g.Lease, g.Err, why)
	default:
	}
}

// A Call is one call of a driver, named for messages, for the tests that
// check every call alike.
type Call struct {
	Name string
	F    func(ctx context.Context) error
}

// CheckClosed makes each of calls with ctx after the driver's client was
// closed, and fails tb for each that does not return a permanent error
// wrapping want (the driver's or its client's ErrClosed) within 100ms.
// when says when the calls are made, for the messages ("after Close").
func CheckClosed(ctx context.Context, tb testing.TB, when string, calls []Call, want error) {
	tb.Helper()
	for _, c := range calls {
		start := time.Now()
		err := c.F(ctx)
		took := time.Since(start)
		if !driver.IsPermanent(err) || !errors.Is(err, want) {
			tb.Errorf("%s %s: %v; want a permanent error wrapping %v", c.Name, when, err, want)
		}
		if took > 100*time.Millisecond {
			tb.Errorf("%s %s took %v; want at once (100ms)", c.Name, when, took)
		}
	}
}

// CheckStalled makes all of calls at once, each with a deadline of 600ms,
// while the server answers none of them (the caller stalled it), and fails
// tb for each that returns an error that does not wrap
// context.DeadlineExceeded or that is permanent, or that returns after
// 600ms, 50ms and twice the machine's timer lateness (lag.Probe.Bound).
func CheckStalled(tb testing.TB, calls []Call) {
	tb.Helper()
	var wg sync.WaitGroup
	for _, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
			defer cancel()
			probe := lag.Start()
			start := time.Now()
			err := c.F(ctx)
			took := time.Since(start)
			if !errors.Is(err, context.DeadlineExceeded) || driver.IsPermanent(err) {
				tb.Errorf("%s with the server stalled: %v; want a transient error wrapping context.DeadlineExceeded", c.Name, err)
			}
			if bound := probe.Bound(600*time.Millisecond, 50*time.Millisecond); took > bound {
				tb.Errorf("%s with the server stalled returned after %v; want by its 600ms deadline (+50ms and twice the machine's timer lateness: %v)", c.Name, took, bound)
			}
			tb.Logf("%s with the server stalled: %v", c.Name, took.Round(time.Millisecond))
		}()
	}
	wg.Wait()
}

// A Backlog holds back the requests of a lagging connection while it is
// on, as a slow network or the buffer of a stalled server does after the
// client gave up, and hands them over, in order, when they land. The zero
// value is off and ready to use; its methods may be called concurrently.
type Backlog[T any] struct {
	mu      sync.Mutex
	on      bool
	pending []T
}

// Start turns b on.
func (b *Backlog[T]) Start() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.on = true
}

// Hold keeps x for Land and reports true when b is on; when b is off it
// keeps nothing and reports false (x goes on its way now).
func (b *Backlog[T]) Hold(x T) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.on {
		b.pending = append(b.pending, x)
	}
	return b.on
}

// Land turns b off and returns what it held, in order.
func (b *Backlog[T]) Land() []T {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.pending
	b.on, b.pending = false, nil
	return p
}

// BenchRefreshBatch measures d's RefreshBatch (d must be a
// driver.BatchRefresher) of n leases, each of a key of its own, that it
// takes first and releases at b's cleanup. reset, when not nil, runs just
// before the measured loop (to zero the caller's counters).
func BenchRefreshBatch(b *testing.B, d driver.Driver, n int, reset func()) {
	b.Helper()
	ctx := context.Background()
	ls := make([]driver.Lease, n)
	for i := range ls {
		l, err := d.TryAcquire(ctx, driver.Request{Key: "bench/batch/" + Owner(), Owner: Owner(), TTL: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		ls[i] = l
	}
	b.Cleanup(func() {
		for _, l := range ls {
			_ = d.Release(ctx, l)
		}
	})
	br := d.(driver.BatchRefresher)
	if reset != nil {
		reset()
	}
	for b.Loop() {
		for _, err := range br.RefreshBatch(ctx, ls) {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// Made records what a test package keeps of each driver it made: its
// client (C) and the fault proxy in front of its connections, for the
// hooks that close a driver's client and stall its server (lockertest's
// WithCloseClient and WithStall). The zero value is ready to use.
type Made[C any] struct{ m sync.Map }

// A Fixture is what Made keeps of a driver.
type Fixture[C any] struct {
	Client C
	Proxy  *faultproxy.Proxy // nil: none (an external server)
}

// Add records d's client c and fault proxy p (nil: none) until tb ends.
func (m *Made[C]) Add(tb testing.TB, d driver.Driver, c C, p *faultproxy.Proxy) {
	m.m.Store(d, Fixture[C]{Client: c, Proxy: p})
	tb.Cleanup(func() { m.m.Delete(d) })
}

// Of returns what Add recorded of d, and fails tb if it recorded nothing.
func (m *Made[C]) Of(tb testing.TB, d driver.Driver) Fixture[C] {
	tb.Helper()
	f, ok := m.m.Load(d)
	if !ok {
		tb.Fatalf("driver %T %p was not made by this package's tests", d, d)
	}
	return f.(Fixture[C])
}

// Stall makes the server stop answering d: d's fault proxy swallows every
// byte, sockets open. The function it returns ends the stall and resets
// the proxy's connections, whose streams the swallowed bytes have torn.
// It fails tb when d has no fault proxy.
func (m *Made[C]) Stall(tb testing.TB, d driver.Driver) (resume func()) {
	tb.Helper()
	p := m.Of(tb, d).Proxy
	if p == nil {
		tb.Fatalf("driver %T %p has no fault proxy to stall", d, d)
	}
	p.Blackhole(true)
	return func() {
		p.Heal()
		p.Reset()
	}
}
