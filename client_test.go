//go:build go1.25

package locker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
)

// TestClient_Close: Close ends every hold (Done, Err), releases the leases
// on the backend, ends waiting calls with ErrClosed, makes later calls fail
// with it, and leaves the handles to their Unlock calls without panics.
func TestClient_Close(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		c := locker.New(b.Driver())
		other := locker.NewMutex(b.Driver(), "busy") // another process
		other.Lock()
		m := c.Mutex("a")
		h, err := c.Mutex("b").Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		m.Lock()
		rw := c.RWMutex("c")
		rw.RLock()
		waited := make(chan error, 1)
		go func() { waited <- c.Mutex("busy").LockContext(context.Background()) }()
		synctest.Wait()

		if err := c.Close(context.Background()); err != nil {
			t.Fatalf("Close = %v", err)
		}
		for _, ch := range []<-chan struct{}{m.Done(), h.Done(), rw.Done(), h.Context().Done()} {
			select {
			case <-ch:
			default:
				t.Fatal("a hold's Done is open after Close")
			}
		}
		checkErr(t, h.Err(), "hold", "b", locker.ErrClosed)
		checkErr(t, m.Err(), "hold", "a", locker.ErrClosed)
		if !errors.Is(context.Cause(h.Context()), locker.ErrClosed) {
			t.Fatalf("hold context cause = %v", context.Cause(h.Context()))
		}
		for _, k := range []string{"a", "b", "c"} {
			if hs := b.Holders(k); len(hs) != 0 {
				t.Fatalf("Close left holders of %q: %+v", k, hs)
			}
		}
		checkErr(t, <-waited, "lock", "busy", locker.ErrClosed)
		if q := b.Queued("busy"); len(q) != 0 {
			t.Fatalf("Close left a waiter queued: %v", q)
		}

		checkErr(t, c.Mutex("d").LockContext(context.Background()), "lock", "d", locker.ErrClosed)
		mustPanic(t, func() { c.Mutex("d").Lock() })
		// TryLock reports the closed Client as false, not as a panic,
		// and does not report the caller's own Close as an error.
		var reported []error
		if c.Mutex("d", locker.WithErrorHandler(func(err error) { reported = append(reported, err) })).TryLock() {
			t.Fatal("TryLock through a closed Client = true")
		}
		if len(reported) != 0 {
			t.Fatalf("TryLock through a closed Client reported %v", reported)
		}
		checkErr(t, m.UnlockContext(context.Background()), "unlock", "a", locker.ErrClosed)
		rw.RUnlock() // no panic: the hold was ended by Close, not misuse
		checkErr(t, h.Release(context.Background()), "release", "b", locker.ErrClosed)
		if err := c.Close(context.Background()); err != nil {
			t.Fatalf("second Close = %v", err)
		}
		other.Unlock()
	})
}

// TestClient_CloseBoundedByContext: a Close whose releases cannot reach the
// backend returns by its deadline.
func TestClient_CloseBoundedByContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		c := locker.New(d)
		c.Mutex("a").Lock()
		d.Block()
		ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := c.Close(ctx)
		if el := time.Since(start); el > 600*time.Millisecond {
			t.Fatalf("Close took %v with a 600ms deadline", el)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close = %v, want the deadline", err)
		}
		d.Unblock()
		if err := c.Close(context.Background()); err != nil {
			t.Fatalf("Close after the backend came back = %v", err)
		}
	})
}

// TestClient_ClosedDriverIsPermanent: a closed backend client is not
// retried: LockContext returns its error, Lock panics with it at once, and
// TryLock reports false at once and the error to the error handler.
func TestClient_ClosedDriverIsPermanent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		d.Close()
		var reported []error
		m := locker.NewMutex(d, "k", locker.WithErrorHandler(func(err error) { reported = append(reported, err) }))
		err := m.LockContext(context.Background())
		if !errors.Is(err, driver.ErrClosed) || !driver.IsPermanent(err) {
			t.Fatalf("LockContext on a closed client = %v", err)
		}
		mustPanic(t, m.Lock)
		start := time.Now()
		if m.TryLock() {
			t.Fatal("TryLock on a closed client = true")
		}
		if el := time.Since(start); el != 0 {
			t.Fatalf("TryLock on a closed client took %v; want no retry", el)
		}
		if len(reported) != 1 || !errors.Is(reported[0], driver.ErrClosed) || !driver.IsPermanent(reported[0]) {
			t.Fatalf("TryLock on a closed client reported %v; want its permanent error once", reported)
		}
		if ok, err := m.TryLockContext(context.Background()); ok || !errors.Is(err, driver.ErrClosed) {
			t.Fatalf("TryLockContext on a closed client = %v, %v", ok, err)
		}
		rw := locker.NewRWMutex(d, "k", locker.WithErrorHandler(func(error) {}))
		if rw.TryRLock() || rw.TryLock() {
			t.Fatal("TryRLock or TryLock on a closed client = true")
		}
		ml := locker.New(d, locker.WithErrorHandler(func(error) {})).MultiLock([]string{"a", "b"})
		if ml.TryLock() {
			t.Fatal("MultiLock.TryLock on a closed client = true")
		}
	})
}

// TestDeadlineKept: with the backend not answering, LockContext returns by
// its deadline on a free key and while waiting, TryLock by the try
// timeout, and the abandoned attempt is cleaned up once the backend
// answers again, before the key's next lock call in the Client.
func TestDeadlineKept(t *testing.T) {
	for _, held := range []bool{false, true} {
		name := map[bool]string{false: "FreeKey", true: "Waiting"}[held]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := memdriver.NewBackend()
				d := b.Driver()
				c := locker.New(d, locker.WithTTL(30*time.Second))
				var holder *locker.Mutex
				if held {
					holder = locker.NewMutex(b.Driver(), "k")
					holder.Lock()
				}
				m := c.Mutex("k")
				if held {
					// Wait on the backend first, then cut it off.
					go func() {
						time.Sleep(100 * time.Millisecond)
						d.Block()
					}()
				} else {
					d.Block()
				}
				ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
				defer cancel()
				start := time.Now()
				err := m.LockContext(ctx)
				if el := time.Since(start); el > 600*time.Millisecond {
					t.Fatalf("LockContext returned after %v with a 600ms deadline", el)
				}
				checkErr(t, err, "lock", "k", context.DeadlineExceeded)
				start = time.Now()
				if m.TryLock() {
					t.Fatal("TryLock succeeded on a backend that does not answer")
				}
				if el := time.Since(start); el > locker.DefaultTryTimeout {
					t.Fatalf("TryLock took %v, want at most %v", el, locker.DefaultTryTimeout)
				}
				d.Unblock()
				if held {
					holder.Unlock()
				}
				if !m.TryLock() {
					t.Fatal("the key is not free once the backend answers again")
				}
				m.Unlock()
				if err := c.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// TestLossRule: a lost hold frees the key for the other lock calls of the
// process at once; the handle that lost it still needs its Unlock, which
// reports the loss, before it locks again.
func TestLossRule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		opt, _ := quiet(t)
		c := locker.New(b.Driver(), opt)
		m := c.Mutex("k")
		m.Lock()
		b.Expire("k")
		<-m.Done()
		checkErr(t, m.Err(), "hold", "k", locker.ErrLost)

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		other := c.Mutex("k")
		if err := other.LockContext(ctx); err != nil {
			t.Fatalf("another handle after the loss: %v", err)
		}
		other.Unlock()
		if err := m.LockContext(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a second Lock on the lost handle before its Unlock = %v, want it to wait", err)
		}
		checkErr(t, m.UnlockContext(context.Background()), "unlock", "k", locker.ErrLost)
		checkErr(t, m.UnlockContext(context.Background()), "unlock", "k", locker.ErrNotHeld)
		m.Lock()
		m.Unlock()
	})
}

// TestHold: the value Acquire returns, its Context, Refresh, Release, and
// how it ends its handle.
func TestHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		c := locker.New(b.Driver())
		m := c.Mutex("k")
		h, err := m.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if h.Key() != "k" || h.Token() == 0 || h.Token() != m.Token() || h.Shared() {
			t.Fatalf("hold key %q token %d shared %v, handle token %d", h.Key(), h.Token(), h.Shared(), m.Token())
		}
		if _, err := c.Mutex("k").TryAcquire(context.Background()); !errors.Is(err, locker.ErrLocked) {
			t.Fatalf("TryAcquire of a held key = %v, want ErrLocked", err)
		}
		if err := h.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		work := h.Context()
		if err := h.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		if work.Err() == nil || !errors.Is(context.Cause(work), locker.ErrNotHeld) {
			t.Fatalf("work context after release: %v, cause %v", work.Err(), context.Cause(work))
		}
		if h.Err() != nil {
			t.Fatalf("Err after a release = %v", h.Err())
		}
		checkErr(t, h.Release(context.Background()), "release", "k", locker.ErrNotHeld)
		checkErr(t, h.Refresh(context.Background()), "refresh", "k", locker.ErrNotHeld)
		mustPanic(t, m.Unlock) // the hold's Release unlocked m
		if len(b.Holders("k")) != 0 {
			t.Fatal("the key is still held")
		}
	})
}

// TestFixedLease: without the watchdog the hold ends at its TTL, before
// the backend lets it go, unless Refresh extends it.
func TestFixedLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		d := &countingDriver{Driver: b.Driver()}
		const ttl = 3 * time.Second
		c := locker.New(d, locker.WithTTL(ttl), locker.WithFixedLease())
		h, err := c.Mutex("k").Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		time.Sleep(2 * time.Second)
		if err := h.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		<-h.Done()
		el := time.Since(start)
		if el < 4*time.Second || el >= 5*time.Second {
			t.Fatalf("fixed lease refreshed at 2s ended after %v, want in [4s, 5s)", el)
		}
		checkErr(t, h.Err(), "hold", "k", locker.ErrLost)
		if n := d.refreshes.Load(); n != 1 {
			t.Fatalf("%d refreshes, want only the explicit one", n)
		}
		if len(b.Holders("k")) != 1 {
			t.Fatal("the backend let the lease go before the holder knew")
		}
		checkErr(t, h.Release(context.Background()), "release", "k", locker.ErrLost)
	})
}

// TestRWMutex_DoneFollowsEveryReader: a lost older read hold closes the
// handle's Done and sets its Err, while a newer one is still held.
func TestRWMutex_DoneFollowsEveryReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		opt, _ := quiet(t)
		c := locker.New(b.Driver(), opt)
		rw := c.RWMutex("cfg")
		older, err := rw.RAcquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		newer, err := rw.RAcquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if older.Token() == newer.Token() {
			t.Fatal("two readers share a token")
		}
		if !b.Revoke("cfg", ownerOf(t, b, "cfg", uint64(older.Token()))) {
			t.Fatal("revoke failed")
		}
		<-older.Done()
		select {
		case <-rw.Done():
		case <-time.After(time.Second):
			t.Fatal("the handle's Done is open after an older reader was lost")
		}
		checkErr(t, rw.Err(), "hold", "cfg", locker.ErrLost)
		if newer.Err() != nil {
			t.Fatalf("newer reader: %v", newer.Err())
		}
		rw.RUnlock()
		rw.RUnlock()
	})
}

func ownerOf(t *testing.T, b *memdriver.Backend, key string, token uint64) string {
	t.Helper()
	for _, l := range b.Holders(key) {
		if l.Token == token {
			return l.Owner
		}
	}
	t.Fatalf("no holder of %q with token %d", key, token)
	return ""
}

// TestErrorMessages: one "locker:" prefix, long keys cut.
func TestErrorMessages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		opt, _ := quiet(t)
		long := strings.Repeat("é", 200)
		m := locker.NewMutex(b.Driver(), long, opt)
		m.Lock()
		b.Expire(long)
		<-m.Done()
		err := m.UnlockContext(context.Background())
		msg := err.Error()
		if n := strings.Count(msg, "locker:"); n != 1 {
			t.Errorf("message has %d locker: prefixes: %s", n, msg)
		}
		if len(msg) > 300 || !strings.Contains(msg, "400 bytes") {
			t.Errorf("message does not cut the 400-byte key: %s", msg)
		}
		var le *locker.Error
		if !errors.As(err, &le) || le.Key != long {
			t.Errorf("Error.Key is not the whole key")
		}
	})
}
