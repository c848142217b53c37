//go:build go1.25

package locker_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
)

// quiet is an error handler for tests that expect reported errors.
func quiet(t *testing.T) (locker.Option, func() []error) {
	var mu sync.Mutex
	var errs []error
	return locker.WithErrorHandler(func(err error) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}), func() []error {
			mu.Lock()
			defer mu.Unlock()
			return append([]error(nil), errs...)
		}
}

func TestMutex_LockUnlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		m := locker.NewMutex(b.Driver(), "orders/42")
		if m.Token() != 0 {
			t.Fatalf("Token before Lock = %d, want 0", m.Token())
		}
		select {
		case <-m.Done():
		default:
			t.Fatal("Done of an unlocked Mutex is not closed")
		}
		m.Lock()
		tok := m.Token()
		if tok == 0 {
			t.Fatal("Token of a held Mutex is 0")
		}
		select {
		case <-m.Done():
			t.Fatal("Done closed while held")
		default:
		}
		if hs := b.Holders("orders/42"); len(hs) != 1 || hs[0].Token != uint64(tok) {
			t.Fatalf("backend holders = %+v, want one with token %d", hs, tok)
		}
		done := m.Done()
		m.Unlock()
		<-done
		if err := m.Err(); err != nil {
			t.Fatalf("Err after Unlock = %v", err)
		}
		if hs := b.Holders("orders/42"); len(hs) != 0 {
			t.Fatalf("backend holders after Unlock = %+v", hs)
		}
		m.Lock()
		if m.Token() <= tok {
			t.Fatalf("second token %d not greater than first %d", m.Token(), tok)
		}
		m.Unlock()
	})
}

func TestMutex_ExcludesAcrossProcesses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		m1 := locker.NewMutex(b.Driver(), "k")
		m2 := locker.NewMutex(b.Driver(), "k") // another "process"
		m1.Lock()
		if m2.TryLock() {
			t.Fatal("TryLock succeeded while another process holds the key")
		}
		got := make(chan locker.Token)
		go func() {
			m2.Lock()
			got <- m2.Token()
		}()
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("Lock returned while the key was held")
		default:
		}
		t1 := m1.Token()
		m1.Unlock()
		if t2 := <-got; t2 <= t1 {
			t.Fatalf("token after handoff %d, want > %d", t2, t1)
		}
		m2.Unlock()
	})
}

func TestMutex_SharedHandleBehavesLikeSyncMutex(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		m := locker.NewMutex(b.Driver(), "k")
		var holders, n atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 5 {
					m.Lock()
					if holders.Add(1) != 1 {
						t.Error("two holders at once")
					}
					time.Sleep(time.Millisecond)
					n.Add(1)
					holders.Add(-1)
					m.Unlock()
				}
			})
		}
		wg.Wait()
		if n.Load() != 40 {
			t.Fatalf("%d critical sections, want 40", n.Load())
		}
	})
}

func TestMutex_LocalWaitersDoNotPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		c := locker.New(b.Driver())
		holder := c.Mutex("k")
		holder.Lock()
		before := b.Stats()
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				m := c.Mutex("k")
				if err := m.LockContext(ctx); err == nil {
					m.Unlock()
				}
			})
		}
		time.Sleep(time.Second)
		synctest.Wait()
		after := b.Stats()
		// Only the head of the local line talks to the backend: a try, a
		// subscription and a retry, then it waits for a notification.
		if tries := after.TryAcquire + after.TryAcquireQueued - before.TryAcquire - before.TryAcquireQueued; tries > 4 {
			t.Errorf("50 local waiters made %d acquire attempts in 1s, want at most 4", tries)
		}
		cancel()
		wg.Wait()
		holder.Unlock()
		if q := b.Queued("k"); len(q) != 0 {
			t.Fatalf("queue after cancel = %v", q)
		}
	})
}

func TestMutex_ReleaserDoesNotBargeLocalWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		d := b.Driver()
		a := locker.NewMutex(d, "k")
		w := locker.NewMutex(d, "k")
		a.Lock()
		var order []string
		var mu sync.Mutex
		done := make(chan struct{})
		go func() {
			w.Lock()
			mu.Lock()
			order = append(order, "waiter")
			mu.Unlock()
			w.Unlock()
			close(done)
		}()
		synctest.Wait() // the waiter is in line
		a.Unlock()
		a.Lock() // locks again at once
		mu.Lock()
		order = append(order, "releaser")
		mu.Unlock()
		a.Unlock()
		<-done
		if strings.Join(order, ",") != "waiter,releaser" {
			t.Fatalf("order = %v, want the waiter first", order)
		}
	})
}

// TestMutex_NoStarvationAcrossProcesses has one process release and lock
// again in a tight loop while another waits: the backend queue must let
// the waiter in within a bounded time.
func TestMutex_NoStarvationAcrossProcesses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		greedy := locker.NewMutex(b.Driver(), "k")
		waiter := locker.NewMutex(b.Driver(), "k")
		stop := make(chan struct{})
		var loops atomic.Int32
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				greedy.Lock()
				time.Sleep(100 * time.Microsecond)
				greedy.Unlock()
				loops.Add(1)
			}
		})
		time.Sleep(time.Millisecond)
		start := time.Now()
		waiter.Lock()
		waited := time.Since(start)
		waiter.Unlock()
		close(stop)
		if waited > 10*time.Millisecond {
			t.Fatalf("waiter starved for %v while the other process looped %d times", waited, loops.Load())
		}
	})
}

func TestMutex_UnlockMisuse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := locker.NewMutex(memdriver.New(), "k")
		func() {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(r.(string), "unlock of unlocked") {
					t.Errorf("Unlock of unlocked Mutex: recover() = %v", r)
				}
			}()
			m.Unlock()
		}()
		err := m.UnlockContext(context.Background())
		checkErr(t, err, "unlock", "k", locker.ErrNotHeld)
		m.Lock()
		if err := m.UnlockContext(context.Background()); err != nil {
			t.Fatal(err)
		}
		err = m.UnlockContext(context.Background()) // double unlock
		checkErr(t, err, "unlock", "k", locker.ErrNotHeld)
	})
}

func checkErr(t *testing.T, err error, op, key string, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("err = %v, want errors.Is %v", err, target)
	}
	var le *locker.Error
	if !errors.As(err, &le) {
		t.Fatalf("err = %T %v, want *locker.Error", err, err)
	}
	if le.Op != op || le.Key != key {
		t.Fatalf("err names op %q key %q, want %q %q", le.Op, le.Key, op, key)
	}
	if !strings.Contains(err.Error(), op) {
		t.Fatalf("message %q does not name the operation", err)
	}
}

// onlyDriver hides every optional interface of the driver it wraps.
type onlyDriver struct{ driver.Driver }

func TestBadInput(t *testing.T) {
	long := strings.Repeat("x", locker.MaxKeyLen+1)
	cases := []struct {
		name   string
		drv    func(*memdriver.Backend) driver.Driver
		key    string
		opts   []locker.Option
		shared bool
		want   error
	}{
		{name: "empty key", key: "", want: locker.ErrInvalidKey},
		{name: "long key", key: long, want: locker.ErrInvalidKey},
		{name: "invalid UTF-8", key: "a\xffb", want: locker.ErrInvalidKey},
		{name: "NUL", key: "a\x00b", want: locker.ErrInvalidKey},
		{name: "zero TTL", key: "k", opts: []locker.Option{locker.WithTTL(0)}, want: locker.ErrInvalidTTL},
		{name: "negative TTL", key: "k", opts: []locker.Option{locker.WithTTL(-time.Second)}, want: locker.ErrInvalidTTL},
		{name: "TTL below every minimum", key: "k", opts: []locker.Option{locker.WithTTL(time.Microsecond)}, want: locker.ErrInvalidTTL},
		{name: "TTL below MinTTL", key: "k", opts: []locker.Option{locker.WithTTL(2 * time.Millisecond)}, want: locker.ErrInvalidTTL},
		{name: "TTL above driver maximum", key: "k", opts: []locker.Option{locker.WithTTL(memdriver.MaxTTL + 1)}, want: locker.ErrInvalidTTL},
		{name: "renew interval too long", key: "k", opts: []locker.Option{locker.WithTTL(time.Second), locker.WithRenewInterval(time.Second)}, want: locker.ErrInvalidOption},
		{name: "bad backoff", key: "k", opts: []locker.Option{locker.WithBackoff(0, 0)}, want: locker.ErrInvalidOption},
		{name: "nil driver", drv: func(*memdriver.Backend) driver.Driver { return nil }, key: "k", want: locker.ErrNilDriver},
		{name: "shared unsupported", drv: func(b *memdriver.Backend) driver.Driver { return onlyDriver{b.Driver()} }, key: "k", shared: true, want: errors.ErrUnsupported},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := memdriver.NewBackend()
			var d driver.Driver = b.Driver()
			if c.drv != nil {
				d = c.drv(b)
			}
			ctx := context.Background()
			if c.shared {
				rw := locker.NewRWMutex(d, c.key, c.opts...)
				checkErr(t, rw.RLockContext(ctx), "rlock", c.key, c.want)
				_, err := rw.TryRLockContext(ctx)
				checkErr(t, err, "tryrlock", c.key, c.want)
				mustPanic(t, rw.RLock)
			} else {
				m := locker.NewMutex(d, c.key, c.opts...)
				checkErr(t, m.LockContext(ctx), "lock", c.key, c.want)
				_, err := m.TryLockContext(ctx)
				checkErr(t, err, "trylock", c.key, c.want)
				mustPanic(t, m.Lock)
				mustPanic(t, func() { m.TryLock() })
				r := locker.NewReentrantMutex(d, c.key, c.opts...)
				_, err = r.Enter(ctx)
				checkErr(t, err, "enter", c.key, c.want)
			}
			if b.Calls() != 0 {
				t.Fatalf("bad input reached the backend: %d calls", b.Calls())
			}
		})
	}
	t.Run("nil context", func(t *testing.T) {
		m := locker.NewMutex(memdriver.New(), "k")
		//lint:ignore SA1012 testing nil context handling
		checkErr(t, m.LockContext(nil), "lock", "k", locker.ErrNilContext) //nolint:staticcheck
	})
	t.Run("done context", func(t *testing.T) {
		b := memdriver.NewBackend()
		m := locker.NewMutex(b.Driver(), "k")
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		checkErr(t, m.LockContext(ctx), "lock", "k", context.Canceled)
		if b.Calls() != 0 {
			t.Fatalf("a done context reached the backend: %d calls", b.Calls())
		}
	})
}

func mustPanic(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	f()
}

func TestLockContext_CancelLeavesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		holder := locker.NewMutex(b.Driver(), "k")
		holder.Lock()
		m := locker.NewMutex(b.Driver(), "k")
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		err := m.LockContext(ctx)
		checkErr(t, err, "lock", "k", context.DeadlineExceeded)
		if q := b.Queued("k"); len(q) != 0 {
			t.Fatalf("cancelled waiter left a queue entry: %v", q)
		}
		if hs := b.Holders("k"); len(hs) != 1 || hs[0].Token != uint64(holder.Token()) {
			t.Fatalf("holders = %+v", hs)
		}
		holder.Unlock()
		if !m.TryLock() {
			t.Fatal("key not free after the holder left")
		}
		m.Unlock()
	})
}

func TestLock_LostReplyOnAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		d := b.Driver()
		opt, _ := quiet(t)
		m := locker.NewMutex(d, "k", opt)
		d.LoseReplies(1) // the grant is applied, its reply lost
		m.Lock()
		hs := b.Holders("k")
		if len(hs) != 1 || hs[0].Token != uint64(m.Token()) {
			t.Fatalf("holders = %+v, token %d: retry must reuse the applied grant", hs, m.Token())
		}
		m.Unlock()
	})
}

func TestTryLock_LostReplyLeavesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		d := b.Driver()
		m := locker.NewMutex(d, "k")
		d.LoseReplies(1)
		ok, err := m.TryLockContext(context.Background())
		if ok || !errors.Is(err, memdriver.ErrReplyLost) {
			t.Fatalf("TryLockContext = %v, %v; want false and the lost reply", ok, err)
		}
		synctest.Wait() // the cleanup runs in the background
		if hs := b.Holders("k"); len(hs) != 0 {
			t.Fatalf("an ambiguous TryLock left a holder: %+v", hs)
		}
	})
}

func TestLock_RetriesTransientErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		d := b.Driver()
		opt, errs := quiet(t)
		m := locker.NewMutex(d, "k", opt)
		d.FailNext(5, nil)
		m.Lock()
		if n := len(errs()); n != 5 {
			t.Fatalf("error handler saw %d errors, want 5", n)
		}
		for _, err := range errs() {
			checkErr(t, err, "lock", "k", memdriver.ErrInjected)
		}
		m.Unlock()
	})
}

func TestLock_PermanentError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		d := b.Driver()
		m := locker.NewMutex(d, "k")
		bad := errors.New("backend misconfigured")
		d.FailNext(1, driver.Permanent(bad))
		err := m.LockContext(context.Background())
		checkErr(t, err, "lock", "k", bad)
		if hs := b.Holders("k"); len(hs) != 0 {
			t.Fatalf("holders = %+v", hs)
		}
	})
}

// TestUnlockBoundedWhenBackendHangs: Unlock without a deadline of its own
// gives up after the lease's TTL when the backend never answers, instead of
// hanging: the lease expires on its own by then.
func TestUnlockBoundedWhenBackendHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		const ttl = 3 * time.Second
		m := locker.NewMutex(d, "k", locker.WithTTL(ttl), locker.WithErrorHandler(func(error) {}))
		m.Lock()
		d.Block()
		defer d.Unblock()
		start := time.Now()
		err := m.UnlockContext(context.Background())
		if err == nil {
			t.Fatal("Unlock on a backend that never answered returned nil")
		}
		if el := time.Since(start); el > ttl {
			t.Errorf("Unlock returned after %v, want within the TTL %v", el, ttl)
		}
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, locker.ErrLost) {
			t.Errorf("Unlock = %v, want a deadline or a loss", err)
		}
	})
}
