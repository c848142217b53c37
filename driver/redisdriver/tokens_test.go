package redisdriver_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/redis/go-redis/v9"
)

// waitNoKeys waits, at most for max, until no Redis key of lock k (default
// prefix) remains.
func waitNoKeys(t *testing.T, c redis.UniversalClient, k string, max time.Duration) {
	t.Helper()
	deadline := time.Now().Add(max)
	for {
		keys, err := c.Keys(ctxT(t), "locker:{"+k+"}:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("keys left %v after release and expiry: %q", max, keys)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// serverMicros returns the server's clock (TIME) in microseconds.
func serverMicros(t *testing.T, c redis.UniversalClient) uint64 {
	t.Helper()
	tm, err := c.Time(ctxT(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	return uint64(tm.UnixMicro())
}

func fenceKey(k string) string { return "locker:{" + k + "}:fence" }

// TestTokensAreServerClock: a grant's token is the server's clock in
// microseconds, on the fast path (exclusive, free key) and on the full
// script (shared, and a handoff to several queued readers at once, whose
// tokens come from one script run and still increase).
func TestTokensAreServerClock(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		c := b.client(t)
		d := newDriver(t, c)
		k := uniqueKey(t, "k")

		before := serverMicros(t, c)
		lx := mustAcquire(t, d, req(k, owner(), driver.Exclusive, time.Second))
		ls := mustAcquire(t, d, req(k+"/s", owner(), driver.Shared, time.Second))
		after := serverMicros(t, c)
		for _, l := range []driver.Lease{lx, ls} {
			if l.Token < before || l.Token > after {
				t.Errorf("token %d of %q outside the server's clock [%d, %d]", l.Token, l.Key, before, after)
			}
		}

		// Five readers queue behind the exclusive hold; its release hands
		// the key to all five in one script run.
		readers := make([]string, 5)
		for i := range readers {
			readers[i] = owner()
			_, err := tryQueued(d, ctx, req(k, readers[i], driver.Shared, 5*time.Second))
			lockedRemaining(t, err)
		}
		if err := d.Release(ctx, lx); err != nil {
			t.Fatal(err)
		}
		var max uint64
		seen := map[uint64]bool{}
		for _, r := range readers {
			l, err := tryQueued(d, ctx, req(k, r, driver.Shared, time.Second))
			if err != nil {
				t.Fatalf("reader after the handoff: %v", err)
			}
			if l.Token <= lx.Token || seen[l.Token] {
				t.Fatalf("reader token %d: not above %d or repeated (%v)", l.Token, lx.Token, seen)
			}
			seen[l.Token] = true
			max = maxU(max, l.Token)
			if err := d.Release(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		if l := mustAcquire(t, d, req(k, owner(), driver.Exclusive, time.Second)); l.Token <= max {
			t.Fatalf("token %d after the readers', want > %d", l.Token, max)
		}
	})
}

func maxU(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// TestTokensAheadOfClock: while the last token is ahead of the server's
// clock (as after the clock stepped back, or several grants in one
// microsecond), grants count up from it, on the fast path and the full
// script alike.
func TestTokensAheadOfClock(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		c := b.client(t)
		d := newDriver(t, c)
		k := uniqueKey(t, "k")
		ahead := serverMicros(t, c) + uint64(time.Minute/time.Microsecond)
		if err := c.Set(ctx, fenceKey(k), strconv.FormatUint(ahead, 10), time.Minute+time.Second).Err(); err != nil {
			t.Fatal(err)
		}
		l1 := mustAcquire(t, d, req(k, owner(), driver.Exclusive, time.Second))
		if err := d.Release(ctx, l1); err != nil {
			t.Fatal(err)
		}
		l2 := mustAcquire(t, d, req(k, owner(), driver.Shared, time.Second))
		if l1.Token != ahead+1 || l2.Token != ahead+2 {
			t.Fatalf("tokens %d, %d after a last token of %d, want the next two", l1.Token, l2.Token, ahead)
		}
		// The last token is kept until the clock passes it.
		if pttl := c.PTTL(ctx, fenceKey(k)).Val(); pttl < 50*time.Second {
			t.Fatalf("fence PTTL %v, want about a minute", pttl)
		}
	})
}

// TestRefusedTakesNoToken: refused attempts, direct or through the
// front-end (a TryLock, a LockContext that times out, queued and shared
// requests), write no token: the last grant's token record expires as if
// they had not happened, and the next grant's token is the clock's.
func TestRefusedTakesNoToken(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		c := b.client(t)
		d := newDriver(t, c)
		k := uniqueKey(t, "k")
		la := mustAcquire(t, d, req(k, owner(), driver.Exclusive, 5*time.Second))
		waitGone(t, c, fenceKey(k))

		for _, r := range []driver.Request{
			req(k, owner(), driver.Exclusive, time.Second),
			req(k, owner(), driver.Shared, time.Second),
		} {
			_, err := d.TryAcquire(ctx, r)
			lockedRemaining(t, err)
			_, err = tryQueued(d, ctx, r)
			lockedRemaining(t, err)
			// The queued entry goes away, as a giving-up waiter's does.
			wantNotHeld(t, "Release of a waiter", d.Release(ctx, driver.Lease{Key: k, Owner: r.Owner, Mode: r.Mode}))
		}
		lc := locker.New(d)
		m := lc.Mutex(k)
		if m.TryLock() {
			t.Fatal("TryLock of a held key succeeded")
		}
		lctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := m.LockContext(lctx)
		cancel()
		if err == nil {
			t.Fatal("LockContext of a held key succeeded")
		}
		// The abandoned wait's queue entry is removed in the background;
		// Close waits for that.
		if err := lc.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if n := c.Exists(ctx, fenceKey(k)).Val(); n != 0 {
			t.Fatalf("refused attempts wrote the token record (%q = %q)", fenceKey(k), c.Get(ctx, fenceKey(k)).Val())
		}
		if err := d.Release(ctx, la); err != nil {
			t.Fatal(err)
		}
		before := serverMicros(t, c)
		if l := mustAcquire(t, d, req(k, owner(), driver.Exclusive, time.Second)); l.Token < before {
			t.Fatalf("token %d after refused attempts, want the clock's (>= %d)", l.Token, before)
		}
	})
}

// waitGone waits until key does not exist, at most 2s.
func waitGone(t *testing.T, c redis.UniversalClient, key string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for c.Exists(ctxT(t), key).Val() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%q still exists (PTTL %v)", key, c.PTTL(ctxT(t), key).Val())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestTokensAcrossRestart: after kill -9 and an empty restart of the server
// (no persistence), new grants get greater tokens than the holds the
// restart lost, exclusive and shared, and the lost holders learn of it.
func TestTokensAcrossRestart(t *testing.T) {
	srv := privateServer(t)
	c := newClient(t, srv.Addr)
	d := newDriver(t, c)
	ctx := ctxT(t)
	k := uniqueKey(t, "k")
	lx := mustAcquire(t, d, req(k, owner(), driver.Exclusive, 10*time.Second))
	ls := mustAcquire(t, d, req(k+"/s", owner(), driver.Shared, 10*time.Second))
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	var l driver.Lease
	eventually(t, "TryAcquire after the restart", 10*time.Second, func() (err error) {
		l, err = d.TryAcquire(ctx, req(k, owner(), driver.Exclusive, time.Second))
		return err
	})
	if l.Token <= lx.Token {
		t.Fatalf("token %d after an empty restart, want > %d, the lost hold's", l.Token, lx.Token)
	}
	if l2 := mustAcquire(t, d, req(k+"/s", owner(), driver.Exclusive, time.Second)); l2.Token <= ls.Token {
		t.Fatalf("token %d after an empty restart, want > %d, the lost shared hold's", l2.Token, ls.Token)
	}
	_, err := d.Refresh(ctx, lx)
	wantNotHeld(t, "Refresh of a hold the restart lost", err)
}

// TestNoKeysLeft locks and releases 10,000 distinct keys, a tenth of them
// contended (refused, queued and shared requests too, counted ones and
// values, handed over with their data), on a server of its own: one TTL after the last release, the server holds as many keys as
// before (none per key ever locked).
func TestNoKeysLeft(t *testing.T) {
	drivertest.Long(t, "locks 10,000 keys")
	srv := privateServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, PoolSize: 16})
	t.Cleanup(func() { _ = c.Close() })
	d := newDriver(t, c)
	ctx := ctxT(t)
	start, err := c.DBSize(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	const n, workers = 10000, 16
	const ttl = time.Second
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				k := fmt.Sprintf("many/%d", i)
				l, err := d.TryAcquire(ctx, manyReq(k, i, ttl))
				if err != nil {
					t.Error(err)
					return
				}
				var waiter *driver.Lease
				if i%12 == 9 {
					// A counted waiter with a value: the release hands
					// the units over to it, data and all.
					w := counted(k, owner(), 2, 1, ttl)
					w.Value = "waiter"
					if _, err := tryQueued(d, ctx, w); !errors.Is(err, driver.ErrLocked) {
						t.Errorf("counted waiter on full %q: %v", k, err)
					}
					waiter = &driver.Lease{Key: k, Owner: w.Owner, Mode: driver.Shared, Abandoned: true} // its token is the handoff's
				}
				if i%10 == 0 {
					o := owner()
					if _, err := tryQueued(d, ctx, req(k, o, driver.Exclusive, ttl)); err == nil {
						t.Errorf("queued request on held %q granted", k)
					}
					if _, err := d.TryAcquire(ctx, req(k, owner(), driver.Exclusive, ttl)); err == nil {
						t.Errorf("request on held %q granted", k)
					}
					if err := d.Release(ctx, driver.Lease{Key: k, Owner: o, Mode: driver.Exclusive}); err == nil {
						t.Errorf("release of a waiter of %q released a hold", k)
					}
				}
				if err := d.Release(ctx, l); err != nil {
					t.Error(err)
					return
				}
				if waiter != nil {
					if err := d.Release(ctx, *waiter); err != nil {
						t.Errorf("release of the handed-over waiter of %q: %v", k, err)
					}
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	waitDBSize(t, c, start, n, ttl)
}

// manyReq is TestNoKeysLeft's request i, of key k: shared or exclusive,
// some with a value, some counted.
func manyReq(k string, i int, ttl time.Duration) driver.Request {
	r := req(k, owner(), driver.Mode(i%2), ttl)
	if i%3 == 0 {
		r.Value = "value of " + k
	}
	if i%4 == 1 {
		r.Limit, r.Weight = 2, 2
	}
	return r
}

// waitDBSize waits, after the last release of n keys locked for ttl,
// until c's DBSIZE is start again: a TTL, and a few seconds more for the
// server's expiry cycle.
func waitDBSize(t *testing.T, c *redis.Client, start int64, n int, ttl time.Duration) {
	t.Helper()
	ctx := ctxT(t)
	released := time.Now()
	time.Sleep(ttl)
	// DBSIZE counts keys that have expired but that the server has not
	// reclaimed yet: allow its expiry cycle a few more seconds.
	deadline := released.Add(ttl + 5*time.Second)
	for {
		size, err := c.DBSize(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if size == start {
			t.Logf("%d keys locked and released: DBSIZE %d again %v after the last release", n, size, time.Since(released).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			keys, _ := c.Keys(ctx, "*").Result()
			t.Fatalf("DBSIZE %d %v after the last release, want %d; %d keys, e.g. %q", size, time.Since(released), start, len(keys), keys[:min(5, len(keys))])
		}
		time.Sleep(20 * time.Millisecond)
	}
}
