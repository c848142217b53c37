package redisdriver_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/redis/go-redis/v9"
)

func subscribe(t *testing.T, d driver.Notifier, key string) driver.Subscription {
	t.Helper()
	s, err := d.Subscribe(ctxT(t), key)
	if err != nil {
		t.Fatalf("Subscribe(%q): %v", key, err)
	}
	return s
}

func wantWake(t *testing.T, what string, s driver.Subscription) {
	t.Helper()
	select {
	case <-s.C():
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no notification", what)
	}
}

func wantQuiet(t *testing.T, what string, s driver.Subscription) {
	t.Helper()
	select {
	case <-s.C():
		t.Fatalf("%s: unexpected notification", what)
	case <-time.After(50 * time.Millisecond):
	}
}

// numSub returns how many connections subscribe to the channel of key.
func numSub(t *testing.T, c redis.UniversalClient, key string) int64 {
	t.Helper()
	ch := "locker:{" + key + "}:released"
	m, err := c.PubSubNumSub(ctxT(t), ch).Result()
	if err != nil {
		t.Fatal(err)
	}
	return m[ch]
}

// waitNumSub waits until numSub is n.
func waitNumSub(t *testing.T, c redis.UniversalClient, key string, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := numSub(t, c, key)
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("PUBSUB NUMSUB = %d, want %d", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wantNoDispatcher fails t if a Driver's pub/sub goroutine runs. Closing
// the last subscription waits for it to end, so none may be left.
//
// A dispatcher of a hub that a failover replaced ends on its own, shortly
// after: like goleak, the check retries for a few seconds before failing.
func wantNoDispatcher(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		for {
			n := runtime.Stack(buf, true)
			if n < len(buf) {
				buf = buf[:n]
				break
			}
			buf = make([]byte, 2*len(buf))
		}
		if !bytes.Contains(buf, []byte("redisdriver.(*Driver).dispatch")) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pub/sub goroutine left running:\n%s", buf)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNotify(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		admin := b.client(t)
		holder := newDriver(t, b.client(t))
		waiter := newDriver(t, b.client(t))
		k, other := uniqueKey(t, "k"), uniqueKey(t, "other")
		defer wantNoDispatcher(t)

		s1 := subscribe(t, waiter, k)
		// Subscribe returns once Redis has the subscription.
		if n := numSub(t, admin, k); n != 1 {
			t.Fatalf("PUBSUB NUMSUB after Subscribe = %d, want 1", n)
		}
		s2 := subscribe(t, waiter, k)
		s3 := subscribe(t, waiter, other)
		if n := numSub(t, admin, k); n != 1 {
			t.Fatalf("PUBSUB NUMSUB with two subscriptions = %d, want 1 (one shared connection)", n)
		}
		wantQuiet(t, "after Subscribe", s1)

		checkReleaseWakes(t, holder, waiter, k, s1, s2, s3)

		// Closing one subscription keeps the others.
		if err := s2.Close(); err != nil {
			t.Fatal(err)
		}
		l := mustAcquire(t, holder, req(k, owner(), driver.Exclusive, time.Second))
		_, err := waiter.TryAcquire(ctx, req(k, owner(), driver.Exclusive, time.Second))
		lockedRemaining(t, err)
		if err := holder.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
		wantWake(t, "s1 after closing s2", s1)

		// Removing the queue's head publishes: the next waiter may go.
		l = mustAcquire(t, holder, req(k, owner(), driver.Exclusive, time.Second))
		w := owner()
		_, err = tryQueued(holder, ctx, req(k, w, driver.Exclusive, time.Second))
		lockedRemaining(t, err)
		wantQuiet(t, "after queueing", s1)
		wantNotHeld(t, "waiter leaves", holder.Release(ctx, driver.Lease{Key: k, Owner: w}))
		wantWake(t, "after the queue's head left", s1)

		if err := s1.Close(); err != nil {
			t.Fatal(err)
		}
		waitNumSub(t, admin, k, 0) // UNSUBSCRIBE is not awaited
		if err := s3.Close(); err != nil {
			t.Fatal(err)
		}
		_ = holder.Release(ctx, l)
		// No goroutine is left (deferred goleak check): the shared
		// connection ended with the last subscription.
	})
}

// checkReleaseWakes is TestNotify's check of which releases of k, by
// holder, wake the subscriptions s1 and s2 of k (and not s3, of another
// key) that waiter made: only those of holds that refused someone, once,
// coalesced.
func checkReleaseWakes(t *testing.T, holder, waiter *redisdriver.Driver, k string, s1, s2, s3 driver.Subscription) {
	t.Helper()
	ctx := ctxT(t)
	// An exclusive hold that refused nobody is released silently:
	// the uncontended release does not publish.
	l := mustAcquire(t, holder, req(k, owner(), driver.Exclusive, time.Second))
	wantQuiet(t, "after acquire", s1)
	if err := holder.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	wantQuiet(t, "after the release of a hold that refused nobody", s1)

	// Once it has refused someone, its release publishes.
	l = mustAcquire(t, holder, req(k, owner(), driver.Exclusive, time.Second))
	_, err := waiter.TryAcquire(ctx, req(k, owner(), driver.Exclusive, time.Second))
	lockedRemaining(t, err)
	wantQuiet(t, "after a refused attempt", s1)
	if err := holder.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	wantWake(t, "s1 after release", s1)
	wantWake(t, "s2 after release", s2)
	wantQuiet(t, "another key's subscription", s3)

	// A failed release publishes nothing.
	wantNotHeld(t, "second release", holder.Release(ctx, l))
	wantQuiet(t, "after a failed release", s1)

	// Coalescing: two releases, one value, no blocking.
	for range 2 {
		l := mustAcquire(t, holder, req(k, owner(), driver.Shared, time.Second))
		if err := holder.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(50 * time.Millisecond)
	wantWake(t, "after two releases", s1)
	wantQuiet(t, "coalesced", s1)
}

func TestSubscribeCanceled(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		d := newDriver(t, b.client(t))
		defer wantNoDispatcher(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := d.Subscribe(ctx, uniqueKey(t, "k")); !errors.Is(err, context.Canceled) {
			t.Fatalf("Subscribe with a canceled context = %v", err)
		}
	})
}

func TestSubscribeConcurrent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		holder := newDriver(t, b.client(t))
		waiter := newDriver(t, b.client(t))
		keys := []string{uniqueKey(t, "a"), uniqueKey(t, "b"), uniqueKey(t, "c")}
		defer wantNoDispatcher(t)

		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(g), 1))
				for range 30 {
					k := keys[r.IntN(len(keys))]
					s, err := waiter.Subscribe(ctx, k)
					if err != nil {
						t.Errorf("Subscribe: %v", err)
						return
					}
					// Every release after Subscribe returned is seen.
					l, err := holder.TryAcquire(ctx, req(k, owner(), driver.Shared, time.Second))
					if err != nil {
						t.Errorf("TryAcquire: %v", err)
						return
					}
					if err := holder.Release(ctx, l); err != nil {
						t.Errorf("Release: %v", err)
						return
					}
					select {
					case <-s.C():
					case <-time.After(5 * time.Second):
						t.Errorf("release of %q not notified", k)
					}
					_ = s.Close()
				}
			})
		}
		wg.Wait()
	})
}

// TestNotifyReconnect breaks the shared pub/sub connection: subscriptions
// are woken, go-redis resubscribes, and releases are delivered again.
func TestNotifyReconnect(t *testing.T) {
	srv := realServer(t)
	admin := newClient(t, srv.Addr)
	d := newDriver(t, newClient(t, srv.Addr))
	ctx := ctxT(t)
	k := uniqueKey(t, "k")
	s := subscribe(t, d, k)
	defer s.Close()

	if err := admin.ClientKillByFilter(ctx, "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	wantWake(t, "after the connection broke", s)
	waitNumSub(t, admin, k, 1)
	time.Sleep(50 * time.Millisecond) // let the resubscription's wake arrive
	select {
	case <-s.C():
	default:
	}
	l := mustAcquireContended(t, d, k)
	if err := d.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	wantWake(t, "release after resubscription", s)
}

// mustAcquireContended acquires k exclusively through d and has a new owner
// refused by the hold, so that its release publishes.
func mustAcquireContended(t *testing.T, d *redisdriver.Driver, k string) driver.Lease {
	t.Helper()
	l := mustAcquire(t, d, req(k, owner(), driver.Exclusive, 5*time.Second))
	_, err := d.TryAcquire(ctxT(t), req(k, owner(), driver.Exclusive, time.Second))
	lockedRemaining(t, err)
	return l
}

// TestSubscribeServerDown: Subscribe fails fast instead of hanging when the
// server is gone, and recovers once it is back.
func TestSubscribeServerDown(t *testing.T) {
	// A private server, to kill it without disturbing other tests.
	own := privateServer(t)
	c := redis.NewClient(&redis.Options{Addr: own.Addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = c.Close() })
	d := newDriver(t, c)
	k := uniqueKey(t, "k")
	s := subscribe(t, d, k)
	if err := own.Kill(); err != nil {
		t.Fatal(err)
	}
	wantWake(t, "server killed", s)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s2, err := d.Subscribe(ctx, uniqueKey(t, "k2")); err == nil {
		s2.Close()
		t.Fatal("Subscribe to a dead server: no error")
	} else if ctx.Err() != nil {
		t.Fatalf("Subscribe to a dead server waited for the context: %v", err)
	}
	if err := own.Restart(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s2, err := d.Subscribe(ctxT(t), k+"2")
		if err == nil {
			s2.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Subscribe after restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The first subscription is back too.
	waitNumSub(t, c, k, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

var _ driver.Notifier = (*redisdriver.Driver)(nil)

// TestHandoff: a release that leaves the key free hands it to the queue's
// head and wakes only the driver that queued it.
func TestHandoff(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		holder := newDriver(t, b.client(t))
		dA, dB := newDriver(t, b.client(t)), newDriver(t, b.client(t))
		k := uniqueKey(t, "k")
		defer wantNoDispatcher(t)

		l := mustAcquire(t, holder, req(k, owner(), driver.Exclusive, 5*time.Second))
		sA, sB := subscribe(t, dA, k), subscribe(t, dB, k)
		defer sA.Close()
		defer sB.Close()
		wA, wB := req(k, owner(), driver.Exclusive, 5*time.Second), req(k, owner(), driver.Exclusive, 5*time.Second)
		for _, q := range []struct {
			d *redisdriver.Driver
			r driver.Request
		}{{dA, wA}, {dB, wB}} {
			_, err := tryQueued(q.d, ctx, q.r)
			lockedRemaining(t, err)
		}
		if err := holder.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
		wantWake(t, "the head's driver after the handoff", sA)
		wantQuiet(t, "another queued owner's driver after the handoff", sB)
		// The key is the head's now: a newcomer is refused.
		_, err := holder.TryAcquire(ctx, req(k, owner(), driver.Exclusive, time.Second))
		lockedRemaining(t, err)
		lA, err := tryQueued(dA, ctx, wA)
		if err != nil {
			t.Fatalf("the head after the handoff: %v", err)
		}
		if lA.Token <= l.Token {
			t.Fatalf("handed-over token %d not above %d", lA.Token, l.Token)
		}
		if lA.Start.IsZero() {
			t.Error("the handed-over lease has no Start: the driver did not take it from the announcement")
		}
		if err := dA.Release(ctx, lA); err != nil {
			t.Fatal(err)
		}
		wantWake(t, "the next head's driver", sB)
		// A queued owner that gives up releases what it was handed.
		if err := dB.Release(ctx, driver.Lease{Key: k, Owner: wB.Owner, Mode: driver.Exclusive, Abandoned: true}); err != nil {
			t.Fatalf("release of a handed-over key by its owner: %v", err)
		}
		mustAcquire(t, holder, req(k, owner(), driver.Exclusive, time.Second))
	})
}
