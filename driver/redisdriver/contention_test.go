package redisdriver_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/go-locker/locker/internal/netcount"
	"github.com/redis/go-redis/v9"
)

// TestHandoffOnDriverChannel: a handoff to an owner that a Driver queued
// is published on that Driver's own channel, not on the key's channel that
// every waiting process reads; the queued owner's driver is woken and
// takes the grant without a round trip.
func TestHandoffOnDriverChannel(t *testing.T) {
	srv := realServer(t)
	ctx := ctxT(t)
	holder := newDriver(t, newClient(t, srv.Addr))
	wc := newClient(t, srv.Addr)
	tc := &tripCounter{}
	wc.AddHook(tc)
	waiter := newDriver(t, wc)
	k := uniqueKey(t, "k")
	defer wantNoDispatcher(t)

	// A reader of the key's channel, as another process's waiter.
	spy := newClient(t, srv.Addr).Subscribe(ctx, "locker:{"+k+"}:released")
	defer spy.Close()
	if _, err := spy.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}

	l, s, w := queuedBehind(t, holder, waiter, k)
	defer s.Close()
	if err := holder.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	wantWake(t, "the queued owner's driver after the handoff", s)
	var lw driver.Lease
	var err error
	wantTrips(t, "TryAcquireQueued after the handoff", tc.count(func() {
		if lw, err = tryQueued(waiter, ctx, w); err != nil {
			t.Fatal(err)
		}
	}))
	rctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if msg, err := spy.ReceiveMessage(rctx); err == nil {
		t.Errorf("the key's channel got %q: the handoff went to every process", msg.Payload)
	}
	if err := waiter.Release(ctx, lw); err != nil {
		t.Fatal(err)
	}
}

// queuedBehind makes holder hold k, and a new owner w wait for it through
// waiter: subscribed (s, which the caller closes) and queued.
func queuedBehind(t *testing.T, holder, waiter *redisdriver.Driver, k string) (l driver.Lease, s driver.Subscription, w driver.Request) {
	t.Helper()
	l = mustAcquire(t, holder, req(k, owner(), driver.Exclusive, 5*time.Second))
	s = subscribe(t, waiter, k)
	w = req(k, owner(), driver.Exclusive, 5*time.Second)
	_, err := tryQueued(waiter, ctxT(t), w)
	lockedRemaining(t, err)
	return l, s, w
}

// TestStaleHandoffAnnouncement: an announced handoff whose token is not
// above what the owner's queued request was told (an earlier grant to the
// same owner, announced late) is not taken as a grant.
func TestStaleHandoffAnnouncement(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		c := b.client(t)
		holder, waiter := newDriver(t, b.client(t)), newDriver(t, c)
		k := uniqueKey(t, "k")
		defer wantNoDispatcher(t)

		l, s, w := queuedBehind(t, holder, waiter, k)
		defer s.Close()
		// A late announcement of an earlier grant to w.
		stale := fmt.Sprintf("g%d:%s", l.Token, w.Owner)
		if err := c.Publish(ctx, "locker:{"+k+"}:released", stale).Err(); err != nil {
			t.Fatal(err)
		}
		wantWake(t, "the announcement", s)
		if got, err := tryQueued(waiter, ctx, w); err == nil {
			t.Fatalf("granted %+v by a stale announcement; the key is still held", got)
		}
		if err := holder.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
		wantWake(t, "the handoff", s)
		lw, err := tryQueued(waiter, ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		if lw.Token <= l.Token {
			t.Fatalf("handed-over token %d not above %d", lw.Token, l.Token)
		}
		if err := waiter.Release(ctx, lw); err != nil {
			t.Fatalf("release of the handed-over key: %v", err)
		}
	})
}

// TestContendedRoundTrips: contenders on one key, each with its own
// client and driver (as separate processes) and a handle it locks again
// right after it unlocks, take at most 2 round trips per acquisition,
// pub/sub included: the release, which hands the key over to the head of
// the queue, and the next lock's queued attempt, which joins the queue at
// once since the handle's last lock waited in it (no refused attempt
// first). The subscription of a wait that follows another costs none (the
// channel lingers), and the handoff none (it comes on the driver's
// channel). It counts the server's commands too (INFO commandstats, the
// scripts' own included): these are counts, which do not depend on the
// machine's speed.
func TestContendedRoundTrips(t *testing.T) {
	srv := realServer(t)
	const n, rounds = 3, 60
	var wc netcount.Counter
	k := uniqueKey(t, "k")
	ms := make([]*locker.Mutex, n)
	for i := range ms {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, Dialer: wc.DialContext})
		t.Cleanup(func() { _ = c.Close() })
		lc := locker.New(newDriver(t, c), locker.WithTTL(10*time.Second))
		t.Cleanup(func() { _ = lc.Close(context.Background()) })
		ms[i] = lc.Mutex(k)
	}
	var holders atomic.Int32
	run := func(per int) int64 {
		ctx := ctxT(t)
		start := wc.Load()
		var wg sync.WaitGroup
		for _, m := range ms {
			wg.Go(func() {
				for range per {
					if err := m.LockContext(ctx); err != nil {
						t.Error(err)
						return
					}
					if holders.Add(1) != 1 {
						t.Error("two holders")
					}
					time.Sleep(200 * time.Microsecond)
					holders.Add(-1)
					if err := m.UnlockContext(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return wc.Load() - start
	}
	run(5) // warm-up: connections, scripts, subscriptions
	stats := newClient(t, srv.Addr)
	cmds := serverCommands(t, stats)
	trips := run(rounds)
	cmds = serverCommands(t, stats) - cmds - 1 // the INFO of the first count
	per := float64(trips) / float64(n*rounds)
	perCmds := float64(cmds) / float64(n*rounds)
	t.Logf("%d round trips and %d server commands for %d acquisitions: %.2f and %.1f each",
		trips, cmds, n*rounds, per, perCmds)
	// 2 each, and some slack for a lock that finds the key free (its
	// releaser had nobody queued) and is refused once before it joins.
	if per > 2.5 {
		t.Errorf("%.2f round trips per acquisition, want at most 2.5", per)
	}
	if perCmds > maxCommandsPerHandoff {
		t.Errorf("%.1f server commands per acquisition, want at most %d", perCmds, maxCommandsPerHandoff)
	}
}

// maxCommandsPerHandoff bounds the server commands (scripts' own
// included) per acquisition on a contended key in TestContendedRoundTrips.
const maxCommandsPerHandoff = 34

// serverCommands returns how many commands the server has run so far, the
// commands that scripts run included (INFO commandstats).
func serverCommands(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for line := range strings.SplitSeq(info, "\n") {
		_, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		v, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			t.Fatalf("INFO commandstats: %q: %v", line, err)
		}
		n += v
	}
	return n
}

// TestHandoffFastPaths: the fast paths of a queued newcomer's refusal and
// of the release that hands the key over keep the full scripts' rules: the
// newcomer queues behind the entries there, a handoff passes over an
// expired head (the full script purges it), and the handed-over token
// exceeds the released one and a token floor ahead of the clock.
func TestHandoffFastPaths(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		d := newDriver(t, b.client(t))
		k := uniqueKey(t, "k")
		l := mustAcquire(t, d, req(k, owner(), driver.Exclusive, 5*time.Second))
		floor := l.Token + uint64(time.Hour/time.Microsecond)
		lf, err := d.TryAcquire(ctx, floorReq(l, floor))
		if err != nil || lf.Token != floor {
			t.Fatalf("token floor: %+v, %v; want token %d", lf, err, floor)
		}
		l.Token = floor
		short := req(k, owner(), driver.Exclusive, 50*time.Millisecond)
		long := req(k, owner(), driver.Exclusive, 5*time.Second)
		for _, w := range []driver.Request{short, long} {
			_, err := tryQueued(d, ctx, w)
			lockedRemaining(t, err)
		}
		time.Sleep(200 * time.Millisecond) // short's entry expires
		if err := d.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
		ll := handedOver(t, d, long, l.Token)
		// A newcomer queued behind a live hold is handed the key by
		// its release.
		_, err = tryQueued(d, ctx, short)
		lockedRemaining(t, err)
		if err := d.Release(ctx, ll); err != nil {
			t.Fatal(err)
		}
		ls := handedOver(t, d, short, ll.Token)
		if err := d.Release(ctx, ls); err != nil {
			t.Fatal(err)
		}
		mustAcquire(t, d, req(k, owner(), driver.Exclusive, time.Second))
	})
}

// handedOver returns the lease that a handoff gave r's owner, and fails t
// unless its token exceeds after.
func handedOver(t *testing.T, d *redisdriver.Driver, r driver.Request, after uint64) driver.Lease {
	t.Helper()
	l, err := tryQueued(d, ctxT(t), r)
	if err != nil {
		t.Fatalf("after the handoff: %v", err)
	}
	if l.Token <= after {
		t.Fatalf("handed-over token %d not above %d", l.Token, after)
	}
	return l
}
