package memcachedriver_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memcachedriver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/memcachedtest"
)

const ttl = memcachedriver.MinTTL

// TestTTL checks the TTLs the driver's Capabilities report: whole seconds
// from MinTTL to MaxTTL, never rounded; package locker refuses another
// TTL, and a read lock, without a request.
func TestTTL(t *testing.T) {
	d, err := memcachedriver.New(memcache.New("127.0.0.1:1"), nil) // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	c := locker.New(d)
	defer c.Close(context.Background())
	caps := d.Capabilities()
	if caps.MinTTL != 3*time.Second || caps.MaxTTL != (30*24*3600-2)*time.Second || caps.TTLUnit != time.Second {
		t.Fatalf("Capabilities() MinTTL, MaxTTL, TTLUnit = %v, %v, %v", caps.MinTTL, caps.MaxTTL, caps.TTLUnit)
	}
	accepts := func(ttl time.Duration) bool {
		return ttl >= caps.MinTTL && ttl <= caps.MaxTTL && ttl%caps.TTLUnit == 0
	}
	for _, ok := range []time.Duration{3 * time.Second, time.Minute, memcachedriver.MaxTTL} {
		if !accepts(ok) {
			t.Errorf("Capabilities() refuse TTL %v", ok)
		}
	}
	for _, bad := range []time.Duration{0, time.Second, 2 * time.Second, 3500 * time.Millisecond, memcachedriver.MaxTTL + time.Second, 30 * 24 * time.Hour} {
		if accepts(bad) {
			t.Errorf("Capabilities() accept TTL %v; want it refused", bad)
		}
		// The front-end refuses it before any request (nothing listens).
		start := time.Now()
		_, err := c.Mutex("k", locker.WithTTL(bad)).TryLockContext(context.Background())
		if !errors.Is(err, locker.ErrInvalidTTL) || time.Since(start) > 100*time.Millisecond {
			t.Errorf("TryLockContext with TTL %v = %v after %v; want an error wrapping locker.ErrInvalidTTL at once", bad, err, time.Since(start))
		}
	}
	_, err = c.RWMutex("k").TryRLockContext(context.Background())
	if !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("TryRLockContext = %v; want an error wrapping errors.ErrUnsupported", err)
	}
}

func TestNew(t *testing.T) {
	if _, err := memcachedriver.New(nil, nil); err == nil {
		t.Error("New(nil) succeeded")
	}
	for _, p := range []string{"has space", strings.Repeat("p", 185)} {
		if _, err := memcachedriver.New(memcache.New("127.0.0.1:1"), &memcachedriver.Options{Prefix: p}); err == nil {
			t.Errorf("New with prefix %q succeeded", p)
		}
	}
}

// TestPrefix checks that drivers with different prefixes do not see each
// other's holds, and that the items carry the prefix.
func TestPrefix(t *testing.T) {
	srv := server(t)
	a := newDriver(t, srv.Addr)
	c := newClient(t, srv.Addr)
	b, err := memcachedriver.New(c, &memcachedriver.Options{Prefix: "other/"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	key := uniqueKey(t)
	la := mustAcquire(t, a, req(key, owner(), ttl))
	lb := mustAcquire(t, b, req(key, owner(), ttl))
	if _, err := c.Get("other/l:" + strings.ReplaceAll(key, " ", "%20")); err != nil {
		t.Errorf("hold item under the prefix: %v", err)
	}
	for _, l := range []driver.Lease{la, lb} {
		d := driver.Driver(a)
		if l == lb {
			d = b
		}
		if err := d.Release(ctxT(t), l); err != nil {
			t.Error(err)
		}
	}
}

// TestLifeCycle checks the lease fields and the hold's life cycle: a
// re-acquire keeps the token; a release frees the key; the next grant has
// a greater token; a foreign or stale lease is refused.
func TestLifeCycle(t *testing.T) {
	srv := server(t)
	d1, d2 := newDriver(t, srv.Addr), newDriver(t, srv.Addr)
	key := uniqueKey(t)
	r := req(key, owner(), ttl)
	l := mustAcquire(t, d1, r)
	again := mustAcquire(t, d1, r)
	if again.Token != l.Token {
		t.Fatalf("re-acquire token %d; want %d", again.Token, l.Token)
	}
	_, err := d2.TryAcquire(ctxT(t), req(key, owner(), ttl))
	var le *driver.LockedError
	if !errors.As(err, &le) || le.Remaining <= 0 || le.Remaining > ttl {
		t.Fatalf("TryAcquire of a held key = %v; want a LockedError with 0 < Remaining <= %v", err, ttl)
	}
	stale := l
	stale.Token++
	if _, err := d1.Refresh(ctxT(t), stale); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Refresh with a wrong token = %v; want ErrNotHeld", err)
	}
	if err := d1.Release(ctxT(t), stale); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Release with a wrong token = %v; want ErrNotHeld", err)
	}
	if _, err := d1.Refresh(ctxT(t), l); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if err := d1.Release(ctxT(t), l); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := d1.Release(ctxT(t), l); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("second Release = %v; want ErrNotHeld", err)
	}
	l2 := mustAcquire(t, d2, req(key, owner(), ttl))
	if l2.Token <= l.Token {
		t.Errorf("token %d after release; want more than %d", l2.Token, l.Token)
	}
	if err := d2.Release(ctxT(t), l2); err != nil {
		t.Fatal(err)
	}
}

// TestRefreshNeverRecreates deletes a hold item behind the driver's back:
// Refresh must report the loss and leave the key free.
func TestRefreshNeverRecreates(t *testing.T) {
	srv := server(t)
	d := newDriver(t, srv.Addr)
	key := uniqueKey(t)
	l := mustAcquire(t, d, req(key, owner(), ttl))
	hk, _ := memcachedriver.ItemKeys(memcachedriver.DefaultPrefix, key)
	if reply, err := memcachedtest.Do(srv.Addr, "delete "+hk); err != nil || reply != "DELETED" {
		t.Fatalf("delete %s = %q, %v", hk, reply, err)
	}
	if _, err := d.Refresh(ctxT(t), l); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Refresh of a deleted hold = %v; want ErrNotHeld", err)
	}
	wantNoItem(t, srv, hk)
}

// wantNoItem fails t unless srv has no item hk.
func wantNoItem(t *testing.T, srv *memcachedtest.Server, hk string) {
	t.Helper()
	if reply, err := memcachedtest.Do(srv.Addr, "get "+hk); err != nil || reply != "END" {
		t.Fatalf("get %s = %q, %v; want no item", hk, reply, err)
	}
}

// TestPendingClaim plants a pending record (an acquire that stopped
// between its add and its compare-and-swap): another owner is refused,
// the same owner takes the claim over and gets a grant, and a Release
// with token 0 removes a pending claim.
func TestPendingClaim(t *testing.T) {
	srv := server(t)
	d := newDriver(t, srv.Addr)
	c := newClient(t, srv.Addr)
	key := uniqueKey(t)
	hk, _ := memcachedriver.ItemKeys(memcachedriver.DefaultPrefix, key)
	own := owner()
	pending := func() {
		t.Helper()
		end := time.Now().Add(ttl).UnixMilli()
		v := fmt.Sprintf("1 0 0123456789abcdef %d 3 %s", end, own)
		if err := c.Set(&memcache.Item{Key: hk, Value: []byte(v), Expiration: 10}); err != nil {
			t.Fatal(err)
		}
	}
	pending()
	if _, err := d.TryAcquire(ctxT(t), req(key, owner(), ttl)); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("TryAcquire by another owner of a pending claim = %v; want ErrLocked", err)
	}
	if _, err := d.Refresh(ctxT(t), driver.Lease{Key: key, Owner: own, TTL: ttl}); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Refresh of a pending claim = %v; want ErrNotHeld (it is not a grant)", err)
	}
	l := mustAcquire(t, d, req(key, own, ttl))
	if err := d.Release(ctxT(t), l); err != nil {
		t.Fatal(err)
	}
	pending()
	if err := d.Release(ctxT(t), driver.Lease{Key: key, Owner: own, TTL: ttl}); err != nil {
		t.Fatalf("Release(token 0) of a pending claim: %v", err)
	}
	wantNoItem(t, srv, hk)
}

// TestForeignValue checks that an item under the driver's key that the
// driver did not write is a permanent error, not a grant or a conflict.
func TestForeignValue(t *testing.T) {
	srv := server(t)
	d := newDriver(t, srv.Addr)
	c := newClient(t, srv.Addr)
	key := uniqueKey(t)
	hk, _ := memcachedriver.ItemKeys(memcachedriver.DefaultPrefix, key)
	if err := c.Set(&memcache.Item{Key: hk, Value: []byte("hello"), Expiration: 10}); err != nil {
		t.Fatal(err)
	}
	_, err := d.TryAcquire(ctxT(t), req(key, owner(), ttl))
	if err == nil || errors.Is(err, driver.ErrLocked) || !driver.IsPermanent(err) {
		t.Fatalf("TryAcquire over a foreign value = %v; want a permanent error", err)
	}
}

// TestTokensAcrossRestart kills and restarts memcached, which loses every
// item, the fence counters included: the counter is created again from
// the clock, so the next token is still greater.
func TestTokensAcrossRestart(t *testing.T) {
	srv := memcachedtest.Private(t)
	d := newDriver(t, srv.Addr)
	key := uniqueKey(t)
	var last uint64
	for i := range 3 {
		l := mustAcquire(t, d, req(key, owner(), ttl))
		if l.Token <= last {
			t.Fatalf("round %d: token %d; want more than %d", i, l.Token, last)
		}
		last = l.Token
		// Two grants in a row within one run of the server.
		if err := d.Release(ctxT(t), l); err != nil {
			t.Fatal(err)
		}
		l = mustAcquire(t, d, req(key, owner(), ttl))
		if l.Token != last+1 {
			t.Fatalf("round %d: token %d; want %d", i, l.Token, last+1)
		}
		last = l.Token
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		// The hold went with the restart: the driver's pooled
		// connections are broken too, and the first call may fail.
		deadline := time.Now().Add(5 * time.Second)
		for {
			_, err := d.Refresh(ctxT(t), l)
			if errors.Is(err, driver.ErrNotHeld) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Refresh after a restart = %v; want ErrNotHeld", err)
			}
		}
	}
}

// TestOutOfMemory fills a memcached that runs with -M (no evictions) and
// 1MB of memory: an acquire must then fail with the server's error, not
// grant the key, and the server evicts nothing.
func TestOutOfMemory(t *testing.T) {
	srv := memcachedtest.Private(t, "-M", "-m", "1", "-I", "512k")
	d := newDriver(t, srv.Addr)
	c := newClient(t, srv.Addr)
	// A hold already granted (for a minute: the filling below takes
	// seconds under the race detector, and the hold must outlast it), and
	// one key used before, whose fence counter exists.
	held := mustAcquire(t, d, req(uniqueKey(t), owner(), time.Minute))
	used := uniqueKey(t)
	if err := d.Release(ctxT(t), mustAcquire(t, d, req(used, owner(), ttl))); err != nil {
		t.Fatal(err)
	}
	// Fill every slab class of items up to 1KB until memcached refuses.
	n := 0
	for size := 1; size <= 1024; size += 8 {
		v := []byte(strings.Repeat("x", size))
		for {
			err := c.Set(&memcache.Item{Key: "fill-" + strconv.Itoa(n), Value: v})
			if err != nil {
				if !strings.Contains(err.Error(), "out of memory") {
					t.Fatalf("filling: %v", err)
				}
				break
			}
			n++
		}
	}
	t.Logf("memcached full after %d items", n)
	for _, key := range []string{uniqueKey(t), used} {
		l, err := d.TryAcquire(ctxT(t), req(key, owner(), ttl))
		if err == nil {
			t.Fatalf("TryAcquire(%q) on a full memcached granted token %d; want an error", key, l.Token)
		}
		if errors.Is(err, driver.ErrLocked) || !strings.Contains(err.Error(), "out of memory") || driver.IsPermanent(err) {
			t.Fatalf("TryAcquire(%q) on a full memcached = %v; want the server's out-of-memory error, not permanent", key, err)
		}
	}
	if ev, err := memcachedtest.Stat(srv.Addr, "evictions"); err != nil || ev != "0" {
		t.Fatalf("evictions = %q, %v; want 0", ev, err)
	}
	// The hold granted before is still there (memcached refuses the
	// add for lack of memory before it looks for the key; the driver
	// then reads the hold).
	if _, err := d.TryAcquire(ctxT(t), req(held.Key, owner(), ttl)); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("TryAcquire of the key held before memory ran out = %v; want ErrLocked", err)
	}
}

// TestNoCAS checks that a memcached without CAS (-C), where a
// compare-and-swap would guard nothing, is a permanent error.
func TestNoCAS(t *testing.T) {
	srv := memcachedtest.Private(t, "-C")
	d := newDriver(t, srv.Addr)
	key := uniqueKey(t)
	_, err := d.TryAcquire(ctxT(t), req(key, owner(), ttl))
	if err == nil || !driver.IsPermanent(err) || !strings.Contains(err.Error(), "CAS") {
		t.Fatalf("TryAcquire on memcached -C = %v; want a permanent error about CAS", err)
	}
}

// TestClosed checks the close hook: after closeClient every call returns,
// within 100ms, an error marked permanent that wraps driver.ErrClosed; a call
// under way when the driver is closed returns as promptly.
func TestClosed(t *testing.T) {
	srv := server(t)
	d := newDriver(t, srv.Addr)
	key := uniqueKey(t)
	l := mustAcquire(t, d, req(key, owner(), ttl))

	// A call under way: stall the connection so that it waits.
	resume := stall(t, d)
	errc := make(chan error, 1)
	go func() {
		_, err := d.TryAcquire(context.Background(), req(uniqueKey(t), owner(), ttl))
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	closed := make(chan struct{})
	go func() {
		closeClient(t, d)
		close(closed)
	}()
	select {
	case err := <-errc:
		if !driver.IsPermanent(err) || !errors.Is(err, driver.ErrClosed) {
			t.Errorf("call under way at Close = %v; want a permanent driver.ErrClosed", err)
		}
		if e := time.Since(start); e > 100*time.Millisecond {
			t.Errorf("call under way returned %v after Close", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("call under way at Close did not return")
	}
	resume()
	<-closed

	calls := callsOn(t, d, l)
	drivertest.CheckClosed(context.Background(), t, "after Close (no deadline)", calls, driver.ErrClosed)
	drivertest.CheckClosed(ctxT(t), t, "after Close", calls, driver.ErrClosed)
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// callsOn returns a TryAcquire of a new key, a Refresh of l and a Release
// of l, all on d.
func callsOn(t *testing.T, d driver.Driver, l driver.Lease) []drivertest.Call {
	return []drivertest.Call{
		{Name: "TryAcquire", F: func(ctx context.Context) error {
			_, err := d.TryAcquire(ctx, req(uniqueKey(t), owner(), ttl))
			return err
		}},
		{Name: "Refresh", F: func(ctx context.Context) error {
			_, err := d.Refresh(ctx, l)
			return err
		}},
		{Name: "Release", F: func(ctx context.Context) error { return d.Release(ctx, l) }},
	}
}

// TestStall checks the stall hook: with memcached answering nothing, each
// call with a 600ms deadline returns within 650ms with an error wrapping
// context.DeadlineExceeded; after the stall the driver works again.
func TestStall(t *testing.T) {
	srv := server(t)
	d := newDriver(t, srv.Addr)
	other := newDriver(t, srv.Addr)
	key := uniqueKey(t)
	l := mustAcquire(t, d, req(key, owner(), ttl))
	resume := stall(t, d)
	drivertest.CheckStalled(t, callsOn(t, d, l))
	// Another client is not stalled: the key is still held.
	if _, err := other.TryAcquire(ctxT(t), req(key, owner(), ttl)); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("TryAcquire by another client during the stall = %v; want ErrLocked", err)
	}
	resume()
	// The Release that gave up goes on in the background once the
	// server answers again: the key is soon free.
	deadline := time.Now().Add(ttl + 4*time.Second)
	for {
		l2, err := other.TryAcquire(ctxT(t), req(key, owner(), ttl))
		if err == nil {
			if err := other.Release(ctxT(t), l2); err != nil {
				t.Fatal(err)
			}
			break
		}
		if !errors.Is(err, driver.ErrLocked) || time.Now().After(deadline) {
			t.Fatalf("TryAcquire after the stall = %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := d.TryAcquire(ctxT(t), req(uniqueKey(t), owner(), ttl)); err != nil {
		t.Fatalf("TryAcquire after the stall: %v", err)
	}
}

// TestAbandonedAcquire cancels a TryAcquire while its requests are held
// back (the server paused). When the server runs again, the abandoned
// call's claim lands, and the call, finding its context ended, takes the
// claim back: Close, which waits for it, leaves the key free for another
// owner at once, not when the claim expires. (The front-end's Release
// with Lease.Abandoned, which removes what such a call left, may run
// before the claim lands.)
func TestAbandonedAcquire(t *testing.T) {
	srv := memcachedtest.Private(t)
	d, other := newDriver(t, srv.Addr), newDriver(t, srv.Addr)
	key := uniqueKey(t)
	// Warm the connection pool, so the paused server holds requests
	// rather than connects.
	mustAcquire(t, d, req(uniqueKey(t), owner(), ttl))
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err := d.TryAcquire(ctx, req(key, owner(), ttl))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("TryAcquire with the server paused = %v", err)
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	d.Close() // waits for the abandoned call
	l, err := other.TryAcquire(ctxT(t), req(key, owner(), ttl))
	if err != nil {
		t.Fatalf("TryAcquire after the abandoned call ended: %v; want the key free", err)
	}
	if err := other.Release(ctxT(t), l); err != nil {
		t.Fatal(err)
	}
}

// endingCtx is a context that ends between its first look and its
// second: Err is nil once, then context.Canceled; Done is closed.
type endingCtx struct {
	context.Context
	looks int
	done  chan struct{}
}

func (c *endingCtx) Done() <-chan struct{} { return c.done }

func (c *endingCtx) Err() error {
	c.looks++
	if c.looks == 1 {
		return nil
	}
	return context.Canceled
}

// TestCloseAfterContextEndsAtStart: a call whose context ends after the
// driver's first look at it, before its requests begin, returns the
// context's error and leaves nothing for Close to wait for. (Close waited
// forever for such a call, which never ran: the conformance suite's
// ContextCanceled caught it under load.)
func TestCloseAfterContextEndsAtStart(t *testing.T) {
	d, err := memcachedriver.New(memcache.New("127.0.0.1:1"), nil) // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	ctx := &endingCtx{Context: context.Background(), done: make(chan struct{})}
	close(ctx.done)
	_, err = d.TryAcquire(ctx, driver.Request{Key: "k", Owner: "o", Mode: driver.Exclusive, TTL: ttl})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("TryAcquire = %v; want context.Canceled", err)
	}
	closed := make(chan struct{})
	go func() {
		d.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close still waits 10s after the only call returned")
	}
}
