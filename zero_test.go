package locker_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/memdriver"
)

// wantZero checks that err wraps ErrZeroValue and names the type and its
// constructor.
func wantZero(t *testing.T, call string, err error, typ, ctor string) {
	t.Helper()
	if !errors.Is(err, locker.ErrZeroValue) {
		t.Errorf("%s: %v; want an error wrapping ErrZeroValue", call, err)
		return
	}
	var le *locker.Error
	if !errors.As(err, &le) {
		t.Errorf("%s: %T is not an *Error", call, err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "locker: ") || strings.Count(msg, "locker:") != 1 ||
		!strings.Contains(msg, "locker."+typ+":") || !strings.Contains(msg, ctor) {
		t.Errorf("%s: message %q; want one prefix, the type locker.%s and %s", call, msg, typ, ctor)
	}
}

// wantZeroPanic checks that f panics with an error wrapping ErrZeroValue
// that names the type.
func wantZeroPanic(t *testing.T, call string, f func(), typ, ctor string) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		err, ok := r.(error)
		if !ok {
			t.Errorf("%s: recovered %v; want a panic with an error wrapping ErrZeroValue", call, r)
			return
		}
		wantZero(t, call, err, typ, ctor)
	}()
	f()
}

// wantPanic checks that f panics with a message containing want.
func wantPanic(t *testing.T, call string, f func(), want string) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if s, ok := r.(string); !ok || !strings.Contains(s, want) {
			t.Errorf("%s: recovered %v; want a panic %q", call, r, want)
		}
	}()
	f()
}

func wantClosed(t *testing.T, call string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	default:
		t.Errorf("%s is not closed", call)
	}
}

func TestZeroMutex(t *testing.T) {
	ctx := context.Background()
	var m locker.Mutex
	const typ, ctor = "Mutex", "NewMutex or Client.Mutex"
	wantZero(t, "LockContext", m.LockContext(ctx), typ, ctor)
	_, err := m.Acquire(ctx)
	wantZero(t, "Acquire", err, typ, ctor)
	_, err = m.TryAcquire(ctx)
	wantZero(t, "TryAcquire", err, typ, ctor)
	ok, err := m.TryLockContext(ctx)
	wantZero(t, "TryLockContext", err, typ, ctor)
	if ok {
		t.Error("TryLockContext of a zero Mutex reported true")
	}
	wantZeroPanic(t, "Lock", m.Lock, typ, ctor)
	wantZeroPanic(t, "TryLock", func() { m.TryLock() }, typ, ctor)
	if err := m.UnlockContext(ctx); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("UnlockContext of a zero Mutex: %v; want ErrNotHeld", err)
	}
	wantPanic(t, "Unlock", m.Unlock, "locker: unlock of unlocked Mutex")
	if m.Token() != 0 || m.Err() != nil || m.Key() != "" {
		t.Errorf("zero Mutex: Token %d, Err %v, Key %q", m.Token(), m.Err(), m.Key())
	}
	wantClosed(t, "Done of a zero Mutex", m.Done())
}

func TestZeroRWMutex(t *testing.T) {
	ctx := context.Background()
	var rw locker.RWMutex
	const typ, ctor = "RWMutex", "NewRWMutex or Client.RWMutex"
	wantZero(t, "LockContext", rw.LockContext(ctx), typ, ctor)
	wantZero(t, "RLockContext", rw.RLockContext(ctx), typ, ctor)
	for name, f := range map[string]func(context.Context) (*locker.Hold, error){
		"Acquire": rw.Acquire, "TryAcquire": rw.TryAcquire, "RAcquire": rw.RAcquire, "TryRAcquire": rw.TryRAcquire,
	} {
		_, err := f(ctx)
		wantZero(t, name, err, typ, ctor)
	}
	_, err := rw.TryLockContext(ctx)
	wantZero(t, "TryLockContext", err, typ, ctor)
	_, err = rw.TryRLockContext(ctx)
	wantZero(t, "TryRLockContext", err, typ, ctor)
	wantZeroPanic(t, "Lock", rw.Lock, typ, ctor)
	wantZeroPanic(t, "RLock", rw.RLock, typ, ctor)
	wantZeroPanic(t, "RLocker().Lock", rw.RLocker().Lock, typ, ctor)
	wantZeroPanic(t, "TryLock", func() { rw.TryLock() }, typ, ctor)
	wantZeroPanic(t, "TryRLock", func() { rw.TryRLock() }, typ, ctor)
	if err := rw.UnlockContext(ctx); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("UnlockContext of a zero RWMutex: %v; want ErrNotHeld", err)
	}
	if err := rw.RUnlockContext(ctx); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("RUnlockContext of a zero RWMutex: %v; want ErrNotHeld", err)
	}
	wantPanic(t, "Unlock", rw.Unlock, "locker: unlock of unlocked RWMutex")
	wantPanic(t, "RUnlock", rw.RUnlock, "locker: RUnlock of unlocked RWMutex")
	wantClosed(t, "Done of a zero RWMutex", rw.Done())
}

func TestZeroReentrantMutex(t *testing.T) {
	ctx := context.Background()
	var r locker.ReentrantMutex
	const typ, ctor = "ReentrantMutex", "NewReentrantMutex or Client.ReentrantMutex"
	lctx, err := r.Enter(ctx)
	wantZero(t, "Enter", err, typ, ctor)
	if lctx != nil {
		t.Error("Enter of a zero ReentrantMutex returned a context")
	}
	_, err = r.TryEnter(ctx)
	wantZero(t, "TryEnter", err, typ, ctor)
	wantZero(t, "Leave", r.Leave(ctx), typ, ctor)
	if r.Hold(ctx) != nil || r.Count(ctx) != 0 || r.Token(ctx) != 0 {
		t.Error("a zero ReentrantMutex reports a hold")
	}
}

func TestZeroClient(t *testing.T) {
	ctx := context.Background()
	const typ, ctor = "Client", "New"
	for name, c := range map[string]*locker.Client{"zero": {}, "nil": nil} {
		t.Run(name, func(t *testing.T) {
			wantZero(t, "Mutex.LockContext", c.Mutex("k").LockContext(ctx), typ, ctor)
			wantZeroPanic(t, "Mutex.Lock", c.Mutex("k").Lock, typ, ctor)
			wantZeroPanic(t, "Mutex.TryLock", func() { c.Mutex("k").TryLock() }, typ, ctor)
			wantZero(t, "RWMutex.RLockContext", c.RWMutex("k").RLockContext(ctx), typ, ctor)
			_, err := c.ReentrantMutex("k").Enter(ctx)
			wantZero(t, "ReentrantMutex.Enter", err, typ, ctor)
			_, err = c.Semaphore("k", 2).Acquire(ctx, 1)
			wantZero(t, "Semaphore.Acquire", err, typ, ctor)
			_, err = c.Election("k").Campaign(ctx, "v")
			wantZero(t, "Election.Campaign", err, typ, ctor)
			_, err = c.MultiLock([]string{"k"}).Acquire(ctx)
			wantZero(t, "MultiLock.Acquire", err, typ, ctor)
			wantZero(t, "MultiLock.LockContext", c.MultiLock([]string{"k"}).LockContext(ctx), typ, ctor)
			wantZero(t, "Close", c.Close(ctx), typ, ctor)
			if c.Driver() != nil {
				t.Error("Driver of a zero Client is not nil")
			}
		})
	}
}

func TestZeroSemaphore(t *testing.T) {
	ctx := context.Background()
	var s locker.Semaphore
	const typ, ctor = "Semaphore", "Client.Semaphore"
	_, err := s.Acquire(ctx, 1)
	wantZero(t, "Acquire", err, typ, ctor)
	_, err = s.TryAcquire(ctx, 1)
	wantZero(t, "TryAcquire", err, typ, ctor)
}

func TestZeroElection(t *testing.T) {
	ctx := context.Background()
	var e locker.Election
	const typ, ctor = "Election", "Client.Election"
	_, err := e.Campaign(ctx, "v")
	wantZero(t, "Campaign", err, typ, ctor)
	_, err = e.Leader(ctx)
	wantZero(t, "Leader", err, typ, ctor)
	_, err = e.Observe(ctx)
	wantZero(t, "Observe", err, typ, ctor)
	if err := e.Resign(ctx); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("Resign of a zero Election: %v; want ErrNotHeld", err)
	}
	wantClosed(t, "Done of a zero Election", e.Done())
}

func TestZeroMultiLock(t *testing.T) {
	ctx := context.Background()
	var m locker.MultiLock
	const typ, ctor = "MultiLock", "Client.MultiLock"
	_, err := m.Acquire(ctx)
	wantZero(t, "Acquire", err, typ, ctor)
	_, err = m.TryAcquire(ctx)
	wantZero(t, "TryAcquire", err, typ, ctor)
	wantZero(t, "LockContext", m.LockContext(ctx), typ, ctor)
	_, err = m.TryLockContext(ctx)
	wantZero(t, "TryLockContext", err, typ, ctor)
	wantZeroPanic(t, "Lock", m.Lock, typ, ctor)
	wantZeroPanic(t, "TryLock", func() { m.TryLock() }, typ, ctor)
	if err := m.UnlockContext(ctx); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("UnlockContext of a zero MultiLock: %v; want ErrNotHeld", err)
	}
	wantPanic(t, "Unlock", m.Unlock, "locker: unlock of unlocked MultiLock")
}

func TestZeroHold(t *testing.T) {
	ctx := context.Background()
	var h locker.Hold
	const typ, ctor = "Hold", "an Acquire method"
	wantZero(t, "Release", h.Release(ctx), typ, ctor)
	wantZero(t, "Refresh", h.Refresh(ctx), typ, ctor)
	wantZero(t, "Err", h.Err(), typ, ctor)
	wantClosed(t, "Done of a zero Hold", h.Done())
	hctx := h.Context()
	wantClosed(t, "Context().Done() of a zero Hold", hctx.Done())
	wantZero(t, "Context cause", context.Cause(hctx), typ, ctor)
	if h.Token() != 0 || h.Key() != "" || h.Weight() != 0 || h.Shared() {
		t.Error("a zero Hold reports a grant")
	}

	var mh locker.MultiHold
	const mtyp, mctor = "MultiHold", "MultiLock.Acquire"
	wantZero(t, "MultiHold.Err", mh.Err(), mtyp, mctor)
	wantClosed(t, "Done of a zero MultiHold", mh.Done())
	wantZero(t, "MultiHold Context cause", context.Cause(mh.Context()), mtyp, mctor)
	if err := mh.Release(ctx); err != nil {
		t.Errorf("Release of a zero MultiHold, which has no part: %v", err)
	}
	if len(mh.Holds()) != 0 || mh.Token("k") != 0 {
		t.Error("a zero MultiHold reports parts")
	}
}

func TestZeroGuard(t *testing.T) {
	var g locker.Guard // the zero Guard is ready to use
	if err := g.Admit("r", 1); err != nil {
		t.Errorf("Admit on a zero Guard: %v", err)
	}
}

// TestZeroDataTypes: the exported types that are plain data, or options,
// work as zero values.
func TestZeroDataTypes(t *testing.T) {
	var e locker.Error
	if got := e.Error(); got != "locker: <nil>" {
		t.Errorf("zero Error = %q", got)
	}
	if got := (&locker.Error{Key: "k", Err: locker.ErrLost}).Error(); got != `locker: "k": hold lost` {
		t.Errorf("Error without Op = %q", got)
	}
	var st locker.StaleTokenError
	if !errors.Is(&st, locker.ErrStaleToken) {
		t.Error("a zero StaleTokenError is not ErrStaleToken")
	}
	// A zero Observer observes nothing; a nil Option is skipped.
	c := locker.New(memdriver.New(), locker.WithObserver(&locker.Observer{}), nil)
	defer c.Close(context.Background())
	m := c.Mutex("k", nil)
	m.Lock()
	m.Unlock()
}
