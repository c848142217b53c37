package redisdriver_test

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/redis/go-redis/v9"
)

// callerHook is a go-redis hook that records the commands the client
// processes, and those it processes on a goroutine without a frame of
// this package's tests: a goroutine of the driver's, not the caller's.
type callerHook struct {
	mu       sync.Mutex
	cmds     []string
	detached []string
}

func (h *callerHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *callerHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.note(cmd.Name())
		return next(ctx, cmd)
	}
}

func (h *callerHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.note("pipeline")
		return next(ctx, cmds)
	}
}

func (h *callerHook) note(name string) {
	buf := make([]byte, 64<<10)
	onCaller := strings.Contains(string(buf[:runtime.Stack(buf, false)]), "redisdriver_test.")
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cmds = append(h.cmds, name)
	if !onCaller {
		h.detached = append(h.detached, name)
	}
}

// check fails t unless the hook saw each of want, all on their callers'
// goroutines.
func (h *callerHook) check(t *testing.T, want ...string) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range want {
		if !slices.Contains(h.cmds, w) {
			t.Errorf("the client's hook did not see %q (saw %v)", w, h.cmds)
		}
	}
	if len(h.detached) > 0 {
		t.Errorf("commands %v ran on a goroutine of their own, not the caller's", h.detached)
	}
}

// defaultClient returns a go-redis client of addr made with default
// options (no ContextTimeoutEnabled), with a callerHook, closed at t's
// cleanup.
func defaultClient(t *testing.T, addr string) (*redis.Client, *callerHook) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	h := &callerHook{}
	c.AddHook(h)
	return c, h
}

// TestDefaultOptionsClient: over a client made with default options, the
// driver's calls go through the client's hooks, on the caller's goroutine,
// and leave the client's options as they were.
func TestDefaultOptionsClient(t *testing.T) {
	c, h := defaultClient(t, realServer(t).Addr)
	d := newDriver(t, c)
	k := uniqueKey(t, "k")
	l := mustAcquire(t, d, req(k, owner(), driver.Exclusive, 10*time.Second))
	if _, err := d.Refresh(ctxT(t), l); err != nil {
		t.Fatal(err)
	}
	for _, err := range d.RefreshBatch(ctxT(t), []driver.Lease{l}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Release(ctxT(t), l); err != nil {
		t.Fatal(err)
	}
	h.check(t, "evalsha", "pipeline")
	if c.Options().ContextTimeoutEnabled {
		t.Error("New turned on ContextTimeoutEnabled in the client's options")
	}
}

// TestDefaultOptionsClientPausedServer: over a client made with default
// options (read timeout 3s), while a real redis-server is paused
// (SIGSTOP), every call returns by its context's deadline (600ms), on the
// caller's goroutine; after the server resumes the driver works again.
func TestDefaultOptionsClientPausedServer(t *testing.T) {
	srv := privateServer(t)
	c, h := defaultClient(t, srv.Addr)
	d := newDriver(t, c)
	k := uniqueKey(t, "k")
	l := mustAcquire(t, d, req(k, owner(), driver.Exclusive, 30*time.Second))
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	calls := allCalls(d, l, k+"/fresh")
	drivertest.CheckStalled(t, calls[:4]) // the calls that go through the client's hooks
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Refresh after the pause", 10*time.Second, func() error {
		_, err := d.Refresh(ctxT(t), l)
		return err
	})
	if err := d.Release(ctxT(t), l); err != nil {
		t.Fatal(err)
	}
	h.check(t, "evalsha", "pipeline")
}
