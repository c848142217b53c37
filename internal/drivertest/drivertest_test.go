package drivertest_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/faultproxy"
	"github.com/go-locker/locker/internal/goleak"
	"github.com/go-locker/locker/internal/proc"
	"github.com/go-locker/locker/internal/testflag"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHelpers(t *testing.T) {
	if a, b := drivertest.Owner(), drivertest.Owner(); len(a) != 32 || a == b {
		t.Fatalf("Owner() = %q, %q: want two different 32-digit owners", a, b)
	}
	k1, k2 := drivertest.UniqueKey(t, "k"), drivertest.UniqueKey(t, "k")
	if k1 == k2 || !strings.HasPrefix(k1, t.Name()+"/k#") {
		t.Fatalf("UniqueKey = %q, %q", k1, k2)
	}
	ctx := drivertest.Context(t, time.Minute)
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > time.Minute {
		t.Fatalf("Context deadline %v, %v", dl, ok)
	}
	d := memdriver.New()
	r := driver.Request{Key: k1, Owner: drivertest.Owner(), Mode: driver.Exclusive, TTL: time.Second}
	l := drivertest.MustAcquire(ctx, t, d, r, r.TTL)
	if l.Token == 0 || l.Key != k1 {
		t.Fatalf("MustAcquire = %+v", l)
	}
	if err := d.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
}

// fakeM counts its runs and returns code.
type fakeM struct {
	runs, code int
}

func (m *fakeM) Run() int { m.runs++; return m.code }

type fakeServer struct {
	closed bool
	err    error
}

func (s *fakeServer) Close() error { s.closed = true; return s.err }

// TestRun checks which start and stop errors let the tests run and which
// make the exit code 1, with LOCKER_REQUIRE_SERVERS unset and set.
func TestRun(t *testing.T) {
	notInstalled := errors.New("not installed")
	other := errors.New("refused")
	for _, tc := range []struct {
		name               string
		required           bool
		startErr           error
		stopErr            error
		wantRuns, wantCode int
	}{
		{"ok", false, nil, nil, 1, 7},
		{"not installed", false, fmt.Errorf("start: %w", notInstalled), nil, 1, 7},
		{"not installed, required", true, notInstalled, nil, 0, 1},
		{"joined not installed", false, errors.Join(notInstalled, fmt.Errorf("x: %w", notInstalled)), nil, 1, 7},
		{"joined with another error", false, errors.Join(notInstalled, other), nil, 0, 1},
		{"other error", false, other, nil, 0, 1},
		{"stop fails", false, nil, other, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.required {
				t.Setenv(proc.EnvRequireServers, "1")
			} else {
				t.Setenv(proc.EnvRequireServers, "")
			}
			m := &fakeM{code: 7}
			stopped := false
			code := drivertest.Run(m, "drivertest", func() error { return tc.startErr }, notInstalled,
				func() error { stopped = true; return tc.stopErr })
			if m.runs != tc.wantRuns || code != tc.wantCode || !stopped {
				t.Fatalf("Run: %d runs, code %d, stopped %v; want %d runs, code %d, stopped", m.runs, code, stopped, tc.wantRuns, tc.wantCode)
			}
		})
	}
	m := &fakeM{}
	if code := drivertest.Run(m, "drivertest", func() error { return other }, nil, func() error { return nil }); code != 1 || m.runs != 0 {
		t.Fatalf("Run with a nil notInstalled and a start error: code %d, %d runs; want 1, 0", code, m.runs)
	}
}

// TestCloseAll checks that CloseAll passes over nil servers, closes the
// others and joins their errors.
func TestCloseAll(t *testing.T) {
	fail := errors.New("close failed")
	a, b := &fakeServer{}, &fakeServer{err: fail}
	if err := drivertest.CloseAll(a, nil, b); !errors.Is(err, fail) || !a.closed || !b.closed {
		t.Fatalf("CloseAll = %v; closed %v, %v", err, a.closed, b.closed)
	}
	if err := drivertest.CloseAll[*fakeServer](); err != nil {
		t.Fatalf("CloseAll() = %v", err)
	}
}

// TestAcquireAsync checks that AcquireAsync's result arrives once the
// holder releases, with the waiter's lease.
func TestAcquireAsync(t *testing.T) {
	ctx := drivertest.Context(t, time.Minute)
	d := memdriver.New()
	key := drivertest.UniqueKey(t, "k")
	r := driver.Request{Key: key, Owner: drivertest.Owner(), Mode: driver.Exclusive, TTL: time.Minute}
	held := drivertest.MustAcquire(ctx, t, d, r, r.TTL)
	w := r
	w.Owner = drivertest.Owner()
	c := drivertest.AcquireAsync(ctx, d, w)
	select {
	case g := <-c:
		t.Fatalf("the waiter got %+v, %v while the key was held", g.Lease, g.Err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := d.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	g := <-c
	if g.Err != nil || g.Lease.Owner != w.Owner || g.Lease.Token <= held.Token {
		t.Fatalf("AcquireAsync = %+v, %v; want the waiter's lease after %d", g.Lease, g.Err, held.Token)
	}
	if err := d.Release(ctx, g.Lease); err != nil {
		t.Fatal(err)
	}
}

// recorder is a testing.TB that records the errors reported to it.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) Helper() {}

// TestCheckClosed checks that CheckClosed passes a call that returns a
// permanent error wrapping the one wanted at once, and reports the others.
func TestCheckClosed(t *testing.T) {
	closed := errors.New("closed")
	r := &recorder{TB: t}
	drivertest.CheckClosed(context.Background(), r, "after Close", []drivertest.Call{
		{Name: "good", F: func(context.Context) error { return driver.Permanent(fmt.Errorf("x: %w", closed)) }},
		{Name: "transient", F: func(context.Context) error { return closed }},
		{Name: "other", F: func(context.Context) error { return driver.Permanent(errors.New("other")) }},
		{Name: "slow", F: func(context.Context) error { time.Sleep(150 * time.Millisecond); return driver.Permanent(closed) }},
	}, closed)
	if len(r.errs) != 3 || !strings.HasPrefix(r.errs[0], "transient after Close") ||
		!strings.HasPrefix(r.errs[1], "other after Close") || !strings.HasPrefix(r.errs[2], "slow after Close took") {
		t.Fatalf("CheckClosed reported %q; want transient, other and slow", r.errs)
	}
}

// TestCheckStalled checks that CheckStalled passes calls that return at
// their deadline with its error, and reports one that returns another
// error or a permanent one.
func TestCheckStalled(t *testing.T) {
	wait := func(ctx context.Context) error { <-ctx.Done(); return fmt.Errorf("x: %w", ctx.Err()) }
	r := &recorder{TB: t}
	drivertest.CheckStalled(r, []drivertest.Call{
		{Name: "a", F: wait},
		{Name: "b", F: wait},
		{Name: "permanent", F: func(ctx context.Context) error { return driver.Permanent(wait(ctx)) }},
		{Name: "refused", F: func(context.Context) error { return errors.New("refused") }},
	})
	slices.Sort(r.errs)
	if len(r.errs) != 2 || !strings.HasPrefix(r.errs[0], "permanent with the server stalled") ||
		!strings.HasPrefix(r.errs[1], "refused with the server stalled") {
		t.Fatalf("CheckStalled reported %q; want permanent and refused", r.errs)
	}
}

// TestBacklog checks that a Backlog holds only while on, and lands what it
// held in order.
func TestBacklog(t *testing.T) {
	var b drivertest.Backlog[int]
	if b.Hold(1) {
		t.Fatal("the zero Backlog held a request")
	}
	b.Start()
	if !b.Hold(2) || !b.Hold(3) {
		t.Fatal("a started Backlog did not hold")
	}
	if got := b.Land(); !slices.Equal(got, []int{2, 3}) {
		t.Fatalf("Land = %v; want [2 3]", got)
	}
	if b.Hold(4) || b.Land() != nil {
		t.Fatal("a landed Backlog held a request")
	}
}

// TestLong checks that Long runs with LOCKER_LONG=1 and without -short
// only.
func TestLong(t *testing.T) {
	short := flag.Lookup("test.short").Value.String()
	t.Cleanup(func() { _ = flag.Set("test.short", short) })
	t.Setenv(testflag.EnvLong, "")
	ranQuick := false
	t.Run("quick", func(t *testing.T) {
		drivertest.Long(t, "takes long")
		ranQuick = true
	})
	if ranQuick {
		t.Error("Long went on without " + testflag.EnvLong)
	}
	t.Setenv(testflag.EnvLong, "1")
	for _, on := range []bool{false, true} {
		if err := flag.Set("test.short", fmt.Sprint(on)); err != nil {
			t.Fatal(err)
		}
		ran := false
		t.Run(fmt.Sprint("short=", on), func(t *testing.T) {
			drivertest.Long(t, "takes long")
			ran = true
		})
		if ran == on {
			t.Errorf("-short=%v: the test went on past Long: %v", on, ran)
		}
	}
}

// counting is a memdriver that counts its holds.
type counting struct {
	*memdriver.Driver
	holds atomic.Int64
}

func (c *counting) TryAcquire(ctx context.Context, r driver.Request) (driver.Lease, error) {
	l, err := c.Driver.TryAcquire(ctx, r)
	if err == nil {
		c.holds.Add(1)
	}
	return l, err
}

func (c *counting) Release(ctx context.Context, l driver.Lease) error {
	err := c.Driver.Release(ctx, l)
	if err == nil {
		c.holds.Add(-1)
	}
	return err
}

// BenchmarkRefreshBatch runs BenchRefreshBatch on memdriver, and checks
// that it ran reset once and released its leases at the end.
func BenchmarkRefreshBatch(b *testing.B) {
	d := &counting{Driver: memdriver.New()}
	reset := 0
	b.Run("100", func(b *testing.B) { drivertest.BenchRefreshBatch(b, d, 100, func() { reset++ }) })
	if reset != 1 || d.holds.Load() != 0 {
		b.Errorf("reset ran %d times, %d holds left; want once, none", reset, d.holds.Load())
	}
}

// TestMade checks that Made returns what Add recorded, forgets it when the
// test that added it ends, and that Stall stalls through the proxy and
// resume ends it.
func TestMade(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // an echo server
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	var made drivertest.Made[string]
	d := memdriver.New()
	t.Run("add", func(t *testing.T) {
		p := faultproxy.ForTest(t, ln.Addr().String())
		made.Add(t, d, "client", p)
		if f := made.Of(t, d); f.Client != "client" || f.Proxy != p {
			t.Fatalf("Of = %+v", f)
		}
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		echo := func() error {
			_ = c.SetDeadline(time.Now().Add(200 * time.Millisecond))
			if _, err := c.Write([]byte("x")); err != nil {
				return err
			}
			_, err := io.ReadFull(c, make([]byte, 1))
			return err
		}
		if err := echo(); err != nil {
			t.Fatalf("echo before the stall: %v", err)
		}
		resume := made.Stall(t, d)
		if err := echo(); err == nil {
			t.Fatal("echo during the stall answered")
		}
		resume()
	})
	r := &recorder{TB: t}
	func() {
		defer func() { _ = recover() }()
		made.Of(fatalTB{r}, d)
	}()
	if len(r.errs) != 1 {
		t.Fatalf("Of after the adding test ended reported %q; want one failure", r.errs)
	}
}

// fatalTB turns Fatalf into a recorded error and a panic, so that a test
// can see a helper's Fatalf without ending.
type fatalTB struct{ *recorder }

func (f fatalTB) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	panic("Fatalf")
}

// TestWantWaiting checks that WantWaiting passes a channel without a
// result and fails on one with a result.
func TestWantWaiting(t *testing.T) {
	c := make(chan drivertest.Acquired, 1)
	drivertest.WantWaiting(t, c, "while held")
	c <- drivertest.Acquired{Err: errors.New("x")}
	r := &recorder{TB: t}
	func() {
		defer func() { _ = recover() }()
		drivertest.WantWaiting(fatalTB{r}, c, "while held")
	}()
	if len(r.errs) != 1 || !strings.HasSuffix(r.errs[0], "while held") {
		t.Fatalf("WantWaiting with a result reported %q; want one failure", r.errs)
	}
}
