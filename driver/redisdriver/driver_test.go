package redisdriver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/redis/go-redis/v9"
)

func lockedRemaining(t *testing.T, err error) time.Duration {
	t.Helper()
	var le *driver.LockedError
	if !errors.Is(err, driver.ErrLocked) || !errors.As(err, &le) {
		t.Fatalf("err = %v, want a *LockedError", err)
	}
	if driver.IsPermanent(err) {
		t.Fatalf("LockedError is permanent: %v", err)
	}
	return le.Remaining
}

func wantNotHeld(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("%s: err = %v, want ErrNotHeld", what, err)
	}
	if driver.IsPermanent(err) {
		t.Fatalf("%s: ErrNotHeld is permanent: %v", what, err)
	}
}

func TestExclusive(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		d := newDriver(t, b.client(t))
		k := uniqueKey(t, "orders/42")
		a, o := owner(), owner()

		la := mustAcquire(t, d, req(k, a, driver.Exclusive, 2*time.Second))
		_, err := d.TryAcquire(ctx, req(k, o, driver.Exclusive, time.Second))
		if rem := lockedRemaining(t, err); rem <= time.Second || rem > 2*time.Second {
			t.Fatalf("Remaining = %v, want in (1s, 2s]", rem)
		}
		_, err = d.TryAcquire(ctx, req(k, o, driver.Shared, time.Second))
		lockedRemaining(t, err)

		// Idempotent re-acquire: same token, TTL changed.
		again := mustAcquire(t, d, req(k, a, driver.Exclusive, 5*time.Second))
		if again.Token != la.Token {
			t.Fatalf("re-acquire token %d, want %d", again.Token, la.Token)
		}
		_, err = d.TryAcquire(ctx, req(k, o, driver.Exclusive, time.Second))
		if rem := lockedRemaining(t, err); rem <= 4*time.Second {
			t.Fatalf("Remaining after re-acquire = %v, want > 4s", rem)
		}

		// Refresh: owner-checked, same token; TTL truncated to ms.
		la.TTL = 3*time.Second + 1500*time.Microsecond
		r, err := d.Refresh(ctx, la)
		if err != nil || r.Token != la.Token || r.TTL != 3001*time.Millisecond {
			t.Fatalf("Refresh = %+v, %v", r, err)
		}
		_, err = d.Refresh(ctx, driver.Lease{Key: k, Owner: o, Mode: driver.Exclusive, TTL: time.Second})
		wantNotHeld(t, "Refresh by another owner", err)
		_, err = d.Refresh(ctx, driver.Lease{Key: k, Owner: a, Mode: driver.Exclusive, Token: la.Token + 1, TTL: time.Second})
		wantNotHeld(t, "Refresh with a wrong token", err)
		_, err = d.Refresh(ctx, driver.Lease{Key: k, Owner: a, Mode: driver.Shared, Token: la.Token, TTL: time.Second})
		wantNotHeld(t, "Refresh in the wrong mode", err)

		// Release: owner-checked.
		wantNotHeld(t, "Release by another owner", d.Release(ctx, driver.Lease{Key: k, Owner: o, Mode: driver.Exclusive, Token: la.Token}))
		wantNotHeld(t, "Release with a wrong token", d.Release(ctx, driver.Lease{Key: k, Owner: a, Mode: driver.Exclusive, Token: la.Token + 1}))
		_, err = d.TryAcquire(ctx, req(k, o, driver.Exclusive, time.Second))
		lockedRemaining(t, err)
		if err := d.Release(ctx, la); err != nil {
			t.Fatalf("Release: %v", err)
		}
		wantNotHeld(t, "second Release", d.Release(ctx, la))
		_, err = d.Refresh(ctx, la)
		wantNotHeld(t, "Refresh after Release", err)

		lo := mustAcquire(t, d, req(k, o, driver.Exclusive, time.Second))
		if lo.Token <= la.Token {
			t.Fatalf("token after release %d, want > %d", lo.Token, la.Token)
		}
		// An abandoned release releases the owner's hold whatever its token.
		if err := d.Release(ctx, driver.Lease{Key: k, Owner: o, Mode: driver.Exclusive, Abandoned: true}); err != nil {
			t.Fatalf("Abandoned release: %v", err)
		}
		mustAcquire(t, d, req(k, a, driver.Exclusive, time.Second))
	})
}

func TestExpiry(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		c := b.client(t)
		d := newDriver(t, c)
		k := uniqueKey(t, "k")
		a, o := owner(), owner()

		la := mustAcquire(t, d, req(k, a, driver.Exclusive, 50*time.Millisecond))
		time.Sleep(120 * time.Millisecond)
		_, err := d.Refresh(ctx, la)
		wantNotHeld(t, "Refresh after expiry", err)
		lo := mustAcquire(t, d, req(k, o, driver.Exclusive, time.Second))
		if lo.Token <= la.Token {
			t.Fatalf("token after expiry %d, want > %d", lo.Token, la.Token)
		}
		// The expired owner cannot take it back, refresh or release it.
		_, err = d.TryAcquire(ctx, req(k, a, driver.Exclusive, time.Second))
		lockedRemaining(t, err)
		_, err = d.Refresh(ctx, la)
		wantNotHeld(t, "Refresh of an expired lease while another holds", err)
		wantNotHeld(t, "Release of an expired lease", d.Release(ctx, la))
		if err := d.Release(ctx, lo); err != nil {
			t.Fatal(err)
		}
		// Nothing remains: the last token lives only until the server's
		// clock has passed it, a millisecond or two.
		waitNoKeys(t, c, k, 2*time.Second)
		mustAcquire(t, d, req(k, a, driver.Exclusive, time.Second))
	})
}

func TestShared(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		c := b.client(t)
		d := newDriver(t, c)
		k := uniqueKey(t, "k")
		r1, r2, w := owner(), owner(), owner()

		l1 := mustAcquire(t, d, req(k, r1, driver.Shared, 80*time.Millisecond))
		l2 := mustAcquire(t, d, req(k, r2, driver.Shared, 2*time.Second))
		if l2.Token <= l1.Token {
			t.Fatalf("tokens %d, %d not increasing", l1.Token, l2.Token)
		}
		again := mustAcquire(t, d, req(k, r1, driver.Shared, 80*time.Millisecond))
		if again.Token != l1.Token {
			t.Fatalf("shared re-acquire token %d, want %d", again.Token, l1.Token)
		}
		_, err := d.TryAcquire(ctx, req(k, w, driver.Exclusive, time.Second))
		if rem := lockedRemaining(t, err); rem <= time.Second || rem > 2*time.Second {
			t.Fatalf("Remaining = %v, want the longest shared hold's", rem)
		}
		// A shared holder asking for exclusive is refused, not upgraded.
		_, err = d.TryAcquire(ctx, req(k, r2, driver.Exclusive, time.Second))
		lockedRemaining(t, err)

		// r1 dies while r2 renews: r1 expires on its own.
		deadline := time.Now().Add(200 * time.Millisecond)
		for time.Now().Before(deadline) {
			if _, err := d.Refresh(ctx, l2); err != nil {
				t.Fatalf("Refresh r2: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		_, err = d.Refresh(ctx, l1)
		wantNotHeld(t, "Refresh of an expired reader", err)
		wantNotHeld(t, "Release of an expired reader", d.Release(ctx, l1))
		if n, _ := c.ZCard(ctx, "locker:{"+k+"}:readers").Result(); n != 1 {
			t.Fatalf("readers = %d, want 1", n)
		}
		if n, _ := c.HLen(ctx, "locker:{"+k+"}:tokens").Result(); n != 1 {
			t.Fatalf("tokens = %d, want 1", n)
		}
		_, err = d.TryAcquire(ctx, req(k, w, driver.Exclusive, time.Second))
		lockedRemaining(t, err)

		// Release of a reader: owner-checked.
		wantNotHeld(t, "Release by a non-reader", d.Release(ctx, driver.Lease{Key: k, Owner: w, Mode: driver.Shared}))
		wantNotHeld(t, "Release in the wrong mode", d.Release(ctx, driver.Lease{Key: k, Owner: r2, Mode: driver.Exclusive}))
		if err := d.Release(ctx, l2); err != nil {
			t.Fatalf("Release r2: %v", err)
		}
		lw := mustAcquire(t, d, req(k, w, driver.Exclusive, time.Second))
		if lw.Token <= l2.Token {
			t.Fatalf("writer token %d, want > %d", lw.Token, l2.Token)
		}
		_, err = d.TryAcquire(ctx, req(k, r1, driver.Shared, time.Second))
		lockedRemaining(t, err)
		_, err = d.TryAcquire(ctx, req(k, w, driver.Shared, time.Second))
		lockedRemaining(t, err) // the exclusive holder asking for shared

		if err := d.Release(ctx, lw); err != nil {
			t.Fatal(err)
		}
		checkReadersExpire(t, c, d, k, r1)
	})
}

// checkReadersExpire is TestShared's check that the readers' keys of k
// expire with their last member, reader.
func checkReadersExpire(t *testing.T, c redis.UniversalClient, d *redisdriver.Driver, k, reader string) {
	t.Helper()
	ctx := ctxT(t)
	mustAcquire(t, d, req(k, reader, driver.Shared, 100*time.Millisecond))
	pttl, _ := c.PTTL(ctx, "locker:{"+k+"}:readers").Result()
	if pttl <= 0 || pttl > 100*time.Millisecond {
		t.Fatalf("readers PTTL = %v, want in (0, 100ms]", pttl)
	}
	time.Sleep(100 * time.Millisecond)
	waitNoKeys(t, c, k, 2*time.Second)
}

func TestQueue(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		d := newDriver(t, b.client(t))
		k := uniqueKey(t, "k")
		h, w1, w2, n := owner(), owner(), owner(), owner()

		lh := mustAcquire(t, d, req(k, h, driver.Exclusive, time.Second))
		for _, w := range []string{w1, w2, w1} { // w1 only once
			_, err := tryQueued(d, ctx, req(k, w, driver.Exclusive, 5*time.Second))
			lockedRemaining(t, err)
		}
		if err := d.Release(ctx, lh); err != nil {
			t.Fatal(err)
		}
		// Free, but queued: only the head may take it.
		_, err := d.TryAcquire(ctx, req(k, n, driver.Exclusive, time.Second))
		if rem := lockedRemaining(t, err); rem <= 4*time.Second {
			t.Fatalf("Remaining behind the queue = %v, want the head's entry (~5s)", rem)
		}
		_, err = tryQueued(d, ctx, req(k, w2, driver.Exclusive, 5*time.Second))
		lockedRemaining(t, err)
		_, err = d.TryAcquire(ctx, req(k, n, driver.Shared, time.Second))
		lockedRemaining(t, err)
		l1 := mustAcquire(t, d, req(k, w1, driver.Exclusive, time.Second)) // plain TryAcquire by the head
		if err := d.Release(ctx, l1); err != nil {
			t.Fatal(err)
		}
		_, err = d.TryAcquire(ctx, req(k, n, driver.Exclusive, time.Second))
		lockedRemaining(t, err) // w2 is the head now
		l2, err := tryQueued(d, ctx, req(k, w2, driver.Exclusive, time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Release(ctx, l2); err != nil {
			t.Fatal(err)
		}
		mustAcquire(t, d, req(k, n, driver.Exclusive, time.Second)) // queue empty
	})
}

func TestQueueShared(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		d := newDriver(t, b.client(t))
		k := uniqueKey(t, "k")
		h, r1, r2, w3, r4 := owner(), owner(), owner(), owner(), owner()

		lh := mustAcquire(t, d, req(k, h, driver.Exclusive, 5*time.Second))
		for _, q := range []driver.Request{
			req(k, r1, driver.Shared, 5*time.Second),
			req(k, r2, driver.Shared, 5*time.Second),
			req(k, w3, driver.Exclusive, 5*time.Second),
			req(k, r4, driver.Shared, 5*time.Second),
		} {
			_, err := tryQueued(d, ctx, q)
			lockedRemaining(t, err)
		}
		if err := d.Release(ctx, lh); err != nil {
			t.Fatal(err)
		}
		// The run of shared entries at the head may go, in any order.
		l2, err := tryQueued(d, ctx, req(k, r2, driver.Shared, time.Second))
		if err != nil {
			t.Fatalf("second reader of the head run: %v", err)
		}
		_, err = tryQueued(d, ctx, req(k, r4, driver.Shared, time.Second))
		lockedRemaining(t, err) // behind the exclusive w3
		l1, err := tryQueued(d, ctx, req(k, r1, driver.Shared, time.Second))
		if err != nil {
			t.Fatalf("head reader: %v", err)
		}
		_, err = tryQueued(d, ctx, req(k, w3, driver.Exclusive, time.Second))
		lockedRemaining(t, err) // head, but readers hold
		for _, l := range []driver.Lease{l1, l2} {
			if err := d.Release(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		_, err = tryQueued(d, ctx, req(k, r4, driver.Shared, time.Second))
		lockedRemaining(t, err) // still behind w3
		grantedQueued(t, d, req(k, w3, driver.Exclusive, time.Second))
		mustAcquire(t, d, req(k, r4, driver.Shared, time.Second))
	})
}

func TestQueueEntryExpiryAndRelease(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		c := b.client(t)
		d := newDriver(t, c)
		k := uniqueKey(t, "k")
		h, dead, quitter, n := owner(), owner(), owner(), owner()

		lh := mustAcquire(t, d, req(k, h, driver.Exclusive, time.Second))
		_, err := tryQueued(d, ctx, req(k, dead, driver.Exclusive, 60*time.Millisecond))
		lockedRemaining(t, err)
		_, err = tryQueued(d, ctx, req(k, quitter, driver.Exclusive, 5*time.Second))
		lockedRemaining(t, err)
		if err := d.Release(ctx, lh); err != nil {
			t.Fatal(err)
		}
		_, err = d.TryAcquire(ctx, req(k, n, driver.Exclusive, time.Second))
		if rem := lockedRemaining(t, err); rem <= 4*time.Second || rem > 5*time.Second {
			t.Fatalf("Remaining = %v, want the last entry's life (~5s)", rem)
		}
		time.Sleep(120 * time.Millisecond) // the dead waiter's entry expires
		_, err = d.TryAcquire(ctx, req(k, n, driver.Exclusive, time.Second))
		lockedRemaining(t, err) // quitter is the head now
		_, err = tryQueued(d, ctx, req(k, dead, driver.Exclusive, time.Second))
		if rem := lockedRemaining(t, err); rem <= 4*time.Second {
			t.Fatalf("Remaining behind quitter = %v, want quitter's entry (~5s)", rem)
		}
		// dead re-joined at the tail: quitter is still the head.
		wantNotHeld(t, "Release of a waiter", d.Release(ctx, driver.Lease{Key: k, Owner: dead, Mode: driver.Exclusive}))
		// A waiter that gives up removes its entry with Release.
		wantNotHeld(t, "Release of a waiter", d.Release(ctx, driver.Lease{Key: k, Owner: quitter, Mode: driver.Exclusive}))
		mustAcquire(t, d, req(k, n, driver.Exclusive, time.Second))
		for _, s := range []string{"queue", "queue-exp"} {
			if ex, _ := c.Exists(ctx, "locker:{"+k+"}:"+s).Result(); ex != 0 {
				t.Errorf("%s left behind", s)
			}
		}
	})
}

func TestQueueKeysExpire(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		c := b.client(t)
		d := newDriver(t, c)
		k := uniqueKey(t, "k")
		mustAcquire(t, d, req(k, owner(), driver.Exclusive, time.Second))
		_, err := tryQueued(d, ctx, req(k, owner(), driver.Exclusive, 80*time.Millisecond))
		lockedRemaining(t, err)
		for _, s := range []string{"queue", "queue-exp"} {
			pttl, _ := c.PTTL(ctx, "locker:{"+k+"}:"+s).Result()
			if pttl <= 0 || pttl > 80*time.Millisecond {
				t.Errorf("%s PTTL = %v, want in (0, 80ms]", s, pttl)
			}
		}
	})
}

func TestTokensIncrease(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		d := newDriver(t, b.client(t))
		k := uniqueKey(t, "k")
		var last uint64
		for i := range 20 {
			mode := driver.Mode(i % 2)
			l := mustAcquire(t, d, req(k, owner(), mode, time.Second))
			if l.Token <= last {
				t.Fatalf("token %d after %d", l.Token, last)
			}
			last = l.Token
			if err := d.Release(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestHostileKeys(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		d := newDriver(t, b.client(t))
		base := uniqueKey(t, "")
		keys := []string{"}x", "{", "}", "{}", "a}b{c", "%7B", "%7D", "%", "x{y}z", "ключ/🔒", "\x01:", ""}
		ls := make([]driver.Lease, len(keys))
		for i, k := range keys {
			ls[i] = mustAcquire(t, d, req(base+k, owner(), driver.Exclusive, time.Second))
		}
		// Each is a distinct lock: all granted, each held.
		for _, l := range ls {
			_, err := d.TryAcquire(ctx, req(l.Key, owner(), driver.Exclusive, time.Second))
			lockedRemaining(t, err)
			if err := d.Release(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestErrors(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		c := b.client(t)
		d := newDriver(t, c)
		k := uniqueKey(t, "k")

		// A foreign value of the wrong type: no retry helps.
		if err := c.HSet(ctx, "locker:{"+k+"}:lock", "f", "v").Err(); err != nil {
			t.Fatal(err)
		}
		_, err := d.TryAcquire(ctx, req(k, owner(), driver.Exclusive, time.Second))
		var rerr redis.Error
		if err == nil || !driver.IsPermanent(err) || !errors.As(err, &rerr) {
			t.Fatalf("acquire over a hash: %v (permanent %v), want a permanent redis.Error", err, driver.IsPermanent(err))
		}
		t.Logf("WRONGTYPE: %v", err)

		// A foreign hold whose token is not a number: an unexpected reply.
		k3, o3 := uniqueKey(t, "k3"), owner()
		if err := c.Set(ctx, "locker:{"+k3+"}:lock", "x:"+o3, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := d.TryAcquire(ctx, req(k3, o3, driver.Exclusive, time.Second)); !driver.IsPermanent(err) {
			t.Errorf("acquire over a foreign token: %v, want a permanent error", err)
		}

		// A canceled context: not permanent, wraps context.Canceled.
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err = d.TryAcquire(cctx, req(uniqueKey(t, "k2"), owner(), driver.Exclusive, time.Second))
		if !errors.Is(err, context.Canceled) || driver.IsPermanent(err) {
			t.Fatalf("canceled: %v", err)
		}
		// Out-of-contract input (a bad mode, a TTL outside the
		// Capabilities' range) is the front-end's to refuse: package
		// locker's tests and lockertest check that it never reaches a
		// driver.
	})
}

func TestUnreachable(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = c.Close() })
	d := newDriver(t, c)
	ctx := ctxT(t)
	_, err := d.TryAcquire(ctx, req("k", owner(), driver.Exclusive, time.Second))
	if err == nil || errors.Is(err, driver.ErrLocked) || driver.IsPermanent(err) {
		t.Fatalf("TryAcquire without a server = %v, want a transient error", err)
	}
	if _, err := d.Subscribe(ctx, "k"); err == nil {
		t.Fatal("Subscribe without a server: no error")
	}
	errs := d.RefreshBatch(ctx, []driver.Lease{{Key: "k", Owner: owner(), TTL: time.Second}})
	if len(errs) != 1 || errs[0] == nil || errors.Is(errs[0], driver.ErrNotHeld) {
		t.Fatalf("RefreshBatch without a server = %v", errs)
	}
}

// TestQueueLeaveUnblocks: an exclusive waiter that leaves the middle of the
// queue lets the shared waiters behind it join the run at the head, and
// tells the subscribers.
func TestQueueLeaveUnblocks(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		d := newDriver(t, b.client(t))
		k := uniqueKey(t, "k")
		r1, w2, r3 := owner(), owner(), owner()
		lh := mustAcquire(t, d, req(k, owner(), driver.Exclusive, time.Second))
		for _, q := range []driver.Request{
			req(k, r1, driver.Shared, 5*time.Second),
			req(k, w2, driver.Exclusive, 5*time.Second),
			req(k, r3, driver.Shared, 5*time.Second),
		} {
			_, err := tryQueued(d, ctx, q)
			lockedRemaining(t, err)
		}
		if err := d.Release(ctx, lh); err != nil {
			t.Fatal(err)
		}
		if _, err := tryQueued(d, ctx, req(k, r1, driver.Shared, time.Second)); err != nil {
			t.Fatal(err)
		}
		_, err := tryQueued(d, ctx, req(k, r3, driver.Shared, time.Second))
		lockedRemaining(t, err)
		s := subscribe(t, d, k)
		defer s.Close()
		wantNotHeld(t, "w2 leaves", d.Release(ctx, driver.Lease{Key: k, Owner: w2, Mode: driver.Exclusive}))
		wantWake(t, "w2 left", s)
		if _, err := tryQueued(d, ctx, req(k, r3, driver.Shared, time.Second)); err != nil {
			t.Fatalf("r3 after w2 left: %v", err)
		}
	})
}

// TestRefusalOfFlaggedHold: the refusals that the acquire script's second
// fast path answers (an exclusive request, not queued, on a hold already
// flagged by an earlier refusal) report what the full script would: the
// hold's remaining time, or the queue's last entry's when longer; and the
// holder itself, or a queued owner, is not refused by it.
func TestRefusalOfFlaggedHold(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		d := newDriver(t, b.client(t))
		k := uniqueKey(t, "k")
		h, n, w := owner(), owner(), owner()

		lh := mustAcquire(t, d, req(k, h, driver.Exclusive, 2*time.Second))
		for range 2 { // flags the hold, then the fast path
			_, err := d.TryAcquire(ctx, req(k, n, driver.Exclusive, time.Second))
			if rem := lockedRemaining(t, err); rem <= time.Second || rem > 2*time.Second {
				t.Fatalf("Remaining = %v, want the hold's, in (1s, 2s]", rem)
			}
		}
		// The holder re-acquires: same token.
		if l := mustAcquire(t, d, req(k, h, driver.Exclusive, 2*time.Second)); l.Token != lh.Token {
			t.Fatalf("re-acquire token %d, want %d", l.Token, lh.Token)
		}
		_, err := tryQueued(d, ctx, req(k, w, driver.Exclusive, 5*time.Second))
		lockedRemaining(t, err)
		_, err = d.TryAcquire(ctx, req(k, n, driver.Exclusive, time.Second))
		if rem := lockedRemaining(t, err); rem <= 4*time.Second || rem > 5*time.Second {
			t.Fatalf("Remaining behind the queue = %v, want its entry's, in (4s, 5s]", rem)
		}
		// The queued owner's own plain attempt goes to the full script,
		// which reports the hold's time (no entry ahead of it).
		_, err = d.TryAcquire(ctx, req(k, w, driver.Exclusive, time.Second))
		if rem := lockedRemaining(t, err); rem <= time.Second || rem > 2*time.Second {
			t.Fatalf("Remaining for the queue's head = %v, want the hold's, in (1s, 2s]", rem)
		}
		if err := d.Release(ctx, lh); err != nil {
			t.Fatal(err)
		}
		// Handed over to w, whose hold is flagged: n is refused.
		_, err = d.TryAcquire(ctx, req(k, n, driver.Exclusive, time.Second))
		lockedRemaining(t, err)
		grantedQueued(t, d, req(k, w, driver.Exclusive, time.Second))
		mustAcquire(t, d, req(k, n, driver.Exclusive, time.Second))
	})
}

// grantedQueued asks for r with TryAcquireQueued, which must grant it,
// and releases the grant.
func grantedQueued(t *testing.T, d *redisdriver.Driver, r driver.Request) {
	t.Helper()
	l, err := tryQueued(d, ctxT(t), r)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Release(ctxT(t), l); err != nil {
		t.Fatal(err)
	}
}
