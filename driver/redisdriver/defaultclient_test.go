package redisdriver_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/redis/go-redis/v9"
)

// checkOnCaller fails t unless c saw a round trip starting with each of
// want, all on their callers' goroutines.
func (c *tripCounter) checkOnCaller(t *testing.T, want ...string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range want {
		if !slices.ContainsFunc(c.trips, func(s string) bool { return strings.HasPrefix(s, w) }) {
			t.Errorf("the client's hook did not see %q (saw %v)", w, c.trips)
		}
	}
	if len(c.detached) > 0 {
		t.Errorf("round trips %v ran on a goroutine of their own, not the caller's", c.detached)
	}
}

// defaultClient returns a go-redis client of addr made with default
// options (no ContextTimeoutEnabled), with a tripCounter, closed at t's
// cleanup.
func defaultClient(t *testing.T, addr string) (*redis.Client, *tripCounter) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	h := &tripCounter{}
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
	h.checkOnCaller(t, "evalsha", "pipeline")
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
	h.checkOnCaller(t, "evalsha", "pipeline")
}
