package lockertest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
	"github.com/go-locker/locker/internal/testflag"
	"github.com/go-locker/locker/lockertest"
)

// A bug is a way to break memdriver, and the subtest of the suite that must
// catch it.
type bug struct {
	name    string
	subtest string // under TestBrokenHelper
}

var bugs = []bug{
	{"release-any-owner", "Driver/ReleaseWrongOwner"},
	{"release-always-nil", "Driver/ReleaseNotHeld"},
	{"refresh-recreates", "Driver/RefreshAfterExpiry"},
	{"refresh-noop", "Driver/RefreshExtends"},
	{"constant-token", "Driver/TokenMonotonic"},
	{"new-token-on-reacquire", "Driver/IdempotentReacquire"},
	{"lossy-keys", "Driver/WeirdKeys"},
	{"plain-busy-error", "Driver/ExclusiveContention"},
	{"ignore-ttl", "Driver/Expiry"},
	{"ignore-ctx", "Driver/ContextCanceled"},
	{"shared-as-exclusive", "Driver/Shared"},
	{"silent-notify", "Driver/Notify"},
	{"queue-ignored", "Driver/Queue"},
	{"batch-all-nil", "Driver/BatchRefresh"},
	// Owners racing for a free key with TryAcquire, released together:
	// the hammer's Mutexes wait in the driver's queue (Acquire, or a
	// handle's queued first attempt), so it met the race in about 1 run
	// in 10 under -race; ExclusiveContention meets it every time.
	{"check-then-grant", "Driver/ExclusiveContention"},
	{"refresh-lies", "Locker/Renewal"},
	{"release-keeps-queue", "Locker/ContextCanceled"},
	{"acquire-out-of-order", "Driver/Acquire"},
	{"acquire-keeps-entry", "Driver/Acquire"},
	{"watch-reports-release", "Driver/WatchLoss"},
	{"floor-ignored", "Driver/TokenFloor"},
	{"claims-acquire", "Driver/Capabilities"},
}

const bugEnv = "LOCKERTEST_BUG"

// TestBrokenDrivers checks that the suite catches broken drivers: each run
// of the test binary applies one bug to memdriver and must fail the subtest
// that checks the broken rule.
func TestBrokenDrivers(t *testing.T) {
	if !testflag.Long() {
		t.Skip("runs the test binary once per bug")
	}
	if os.Getenv(bugEnv) != "" {
		t.Skip("in a helper process")
	}
	for _, b := range bugs {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			pattern := "^TestBrokenHelper$/^" + strings.ReplaceAll(b.subtest, "/", "$/^") + "$"
			cmd := exec.Command(os.Args[0], "-test.run="+pattern, "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), bugEnv+"="+b.name)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the suite passed a driver with bug %q (err = %v):\n%s", b.name, err, out)
			}
			if want := "--- FAIL: TestBrokenHelper/" + b.subtest + " "; !strings.Contains(string(out), want) {
				t.Errorf("with bug %q, the output lacks %q:\n%s", b.name, want, out)
			}
		})
	}
}

// TestBrokenHelper runs the suite over a broken memdriver in a process
// started by TestBrokenDrivers.
func TestBrokenHelper(t *testing.T) {
	name := os.Getenv(bugEnv)
	if name == "" {
		t.Skip("helper for TestBrokenDrivers")
	}
	b := memdriver.NewBackend()
	var seq atomic.Uint64
	st := &brokenState{acquired: map[string]bool{}, watches: map[string]func(error){}}
	lockertest.TestDriver(t, func(t *testing.T) driver.Driver {
		d := &broken{Driver: b.Driver(), b: b, bug: name, seq: &seq, st: st}
		if withoutAcquirer[name] {
			return &waitless{d}
		}
		return d
	})
}

// withoutAcquirer lists the bugs whose drivers report neither Acquire nor
// WatchLoss in their Capabilities, as Redis does: a queue entry left by Release matters
// only to the front-end's own wait loop, and memdriver's truthful loss
// reports would reveal a lying refresh before Locker/Renewal can.
var withoutAcquirer = map[string]bool{
	"release-keeps-queue": true,
	"refresh-lies":        true,
	"claims-acquire":      true, // and reports Acquire all the same
}

// waitless is a broken driver without Acquire and WatchLoss (nor counted
// requests, values, inspection or token floors).
type waitless struct{ d *broken }

func (w *waitless) TryAcquire(ctx context.Context, r driver.Request) (driver.Lease, error) {
	return w.d.TryAcquire(ctx, r)
}

func (w *waitless) Refresh(ctx context.Context, l driver.Lease) (driver.Lease, error) {
	return w.d.Refresh(ctx, l)
}

func (w *waitless) Release(ctx context.Context, l driver.Lease) error { return w.d.Release(ctx, l) }

func (w *waitless) RefreshBatch(ctx context.Context, ls []driver.Lease) []error {
	return w.d.RefreshBatch(ctx, ls)
}

func (w *waitless) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	return w.d.Subscribe(ctx, key)
}

func (w *waitless) Capabilities() driver.Capabilities {
	c := w.d.Capabilities()
	return driver.Capabilities{
		Shared: c.Shared, MinTTL: c.MinTTL, MaxTTL: c.MaxTTL,
		Queue: c.Queue, Notify: c.Notify, RefreshBatch: c.RefreshBatch,
		Acquire: w.d.bug == "claims-acquire",
	}
}

// broken is memdriver with one bug.
type broken struct {
	*memdriver.Driver
	b   *memdriver.Backend
	bug string
	seq *atomic.Uint64
	st  *brokenState
}

// brokenState is shared by the broken drivers of one backend.
type brokenState struct {
	mu       sync.Mutex
	acquired map[string]bool        // keys Acquire was called for
	watches  map[string]func(error) // by owner
}

func (d *broken) ctx(ctx context.Context) context.Context {
	if d.bug == "ignore-ctx" {
		return context.Background()
	}
	return ctx
}

func lossy(key string) string { return strings.ReplaceAll(key, "/", "_") }

func (d *broken) TryAcquire(ctx context.Context, r driver.Request) (driver.Lease, error) {
	if r.Queued {
		return d.tryAcquireQueued(ctx, r)
	}
	if r.MinToken != 0 && d.bug == "floor-ignored" {
		r.MinToken = 0 // a re-acquire: the token stays as it was
	}
	ctx = d.ctx(ctx)
	key := r.Key
	switch d.bug {
	case "lossy-keys":
		r.Key = lossy(r.Key)
	case "ignore-ttl":
		r.TTL = time.Minute
	case "shared-as-exclusive":
		r.Mode = driver.Exclusive
	case "check-then-grant":
		// Look, then leap: two owners may both see the key free.
		if len(d.b.Holders(r.Key)) > 0 {
			return driver.Lease{}, driver.ErrLocked
		}
		time.Sleep(time.Millisecond)
		d.b.Expire(r.Key)
	}
	l, err := d.Driver.TryAcquire(ctx, r)
	l.Key = key
	switch d.bug {
	case "ignore-ttl":
		l.TTL = min(l.TTL, time.Second)
	case "shared-as-exclusive":
		l.Mode = driver.Shared
	case "constant-token":
		l.Token = 1
	case "new-token-on-reacquire":
		l.Token = l.Token<<32 + d.seq.Add(1)
	case "plain-busy-error":
		if errors.Is(err, driver.ErrLocked) {
			err = errors.New("busy")
		}
	}
	return l, err
}

// tryAcquireQueued is TryAcquire with r.Queued.
func (d *broken) tryAcquireQueued(ctx context.Context, r driver.Request) (driver.Lease, error) {
	if d.bug == "queue-ignored" {
		r.Queued = false
		return d.Driver.TryAcquire(ctx, r)
	}
	return d.Driver.TryAcquire(d.ctx(ctx), r)
}

func (d *broken) Acquire(ctx context.Context, r driver.Request) (driver.Lease, error) {
	if d.bug == "acquire-out-of-order" {
		// The first waiter for a key joins the backend's queue late.
		d.st.mu.Lock()
		first := !d.st.acquired[r.Key]
		d.st.acquired[r.Key] = true
		d.st.mu.Unlock()
		if first {
			select {
			case <-time.After(2 * time.Second):
			case <-ctx.Done():
			}
		}
	}
	l, err := d.Driver.Acquire(d.ctx(ctx), r)
	if d.bug == "acquire-keeps-entry" && err != nil && ctx.Err() != nil {
		// Gives up, but leaves a queue entry behind.
		r.Queued = true
		d.Driver.TryAcquire(context.Background(), r)
	}
	return l, err
}

func (d *broken) WatchLoss(l driver.Lease, lost func(error)) (stop func()) {
	stopInner := d.Driver.WatchLoss(l, lost)
	if d.bug != "watch-reports-release" {
		return stopInner
	}
	// Reports the owner's own Release as a loss.
	d.st.mu.Lock()
	d.st.watches[l.Owner] = lost
	d.st.mu.Unlock()
	return func() {
		d.st.mu.Lock()
		delete(d.st.watches, l.Owner)
		d.st.mu.Unlock()
		stopInner()
	}
}

func (d *broken) Refresh(ctx context.Context, l driver.Lease) (driver.Lease, error) {
	ctx = d.ctx(ctx)
	key := l.Key
	switch d.bug {
	case "lossy-keys":
		l.Key = lossy(l.Key)
	case "shared-as-exclusive":
		l.Mode = driver.Exclusive
	case "refresh-lies":
		return l, nil
	case "refresh-noop":
		for _, h := range d.b.Holders(l.Key) {
			if h.Owner == l.Owner {
				return h, nil
			}
		}
		return driver.Lease{}, driver.ErrNotHeld
	}
	nl, err := d.Driver.Refresh(ctx, l)
	nl.Key = key
	if d.bug == "refresh-recreates" && errors.Is(err, driver.ErrNotHeld) {
		r := driver.Request{Key: l.Key, Owner: l.Owner, Mode: l.Mode, TTL: l.TTL}
		if nl, err2 := d.Driver.TryAcquire(ctx, r); err2 == nil {
			return nl, nil
		}
	}
	if d.bug == "shared-as-exclusive" {
		nl.Mode = driver.Shared
	}
	return nl, err
}

func (d *broken) Release(ctx context.Context, l driver.Lease) error {
	ctx = d.ctx(ctx)
	switch d.bug {
	case "lossy-keys":
		l.Key = lossy(l.Key)
	case "shared-as-exclusive":
		l.Mode = driver.Exclusive
	}
	if d.bug == "release-keeps-queue" && !slices.ContainsFunc(d.b.Holders(l.Key), func(h driver.Lease) bool { return h.Owner == l.Owner }) {
		return driver.ErrNotHeld
	}
	err := d.Driver.Release(ctx, l)
	if d.bug == "watch-reports-release" && err == nil {
		d.st.mu.Lock()
		lost := d.st.watches[l.Owner]
		d.st.mu.Unlock()
		if lost != nil {
			go lost(driver.ErrNotHeld)
		}
	}
	switch d.bug {
	case "release-any-owner":
		if errors.Is(err, driver.ErrNotHeld) {
			d.b.Expire(l.Key)
			return nil
		}
	case "release-always-nil":
		return nil
	}
	return err
}

func (d *broken) RefreshBatch(ctx context.Context, ls []driver.Lease) []error {
	if d.bug == "refresh-lies" {
		return make([]error, len(ls))
	}
	errs := d.Driver.RefreshBatch(d.ctx(ctx), ls)
	if d.bug == "batch-all-nil" {
		clear(errs)
	}
	return errs
}

func (d *broken) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	if d.bug == "silent-notify" {
		return silent{make(chan struct{})}, nil
	}
	return d.Driver.Subscribe(d.ctx(ctx), key)
}

type silent struct{ c chan struct{} }

func (s silent) C() <-chan struct{} { return s.c }
func (s silent) Close() error       { return nil }
