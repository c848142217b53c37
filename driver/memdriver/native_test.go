//go:build go1.25

package memdriver_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
)

// acquireResult is the outcome of one Acquire call run in a goroutine.
type acquireResult struct {
	l   driver.Lease
	err error
	at  time.Time
}

// goAcquire starts Acquire(ctx, r) on d and returns the channel its result
// arrives on.
func goAcquire(ctx context.Context, d *memdriver.Driver, r driver.Request) chan acquireResult {
	c := make(chan acquireResult, 1)
	go func() {
		l, err := d.Acquire(ctx, r)
		c <- acquireResult{l, err, time.Now()}
	}()
	return c
}

// pending reports whether c has no result yet.
func pending(c chan acquireResult) bool {
	select {
	case r := <-c:
		c <- r // put it back for the caller's next receive
		return false
	default:
		return true
	}
}

func TestAcquireFreeKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		b := d.Backend()
		r := rq("k", "a", ex, time.Second)
		l, err := d.Acquire(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		if l.Key != "k" || l.Owner != "a" || l.Mode != ex || l.TTL != time.Second || l.Token != 1 {
			t.Fatalf("Acquire = %+v", l)
		}
		if got := b.Stats(); got.Acquire != 1 || got.Total() != 1 {
			t.Fatalf("Stats = %+v, want one Acquire", got)
		}
		wantQueue(t, b, "k")
		// Idempotent for the holder, like TryAcquire.
		l2, err := d.Acquire(context.Background(), r)
		if err != nil || l2.Token != l.Token {
			t.Fatalf("second Acquire by the holder = %+v, %v; want token %d", l2, err, l.Token)
		}
		// The holder asking for the other mode cannot be helped by waiting.
		_, err = d.Acquire(context.Background(), rq("k", "a", sh, time.Second))
		wantLocked(t, err, -1)
		wantQueue(t, b, "k")
	})
}

// TestAcquireFIFO has three waiters queue up behind a holder: they are
// served in the order they called Acquire, newcomers wait behind them, and
// tokens grow.
func TestAcquireFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		ctx := context.Background()
		h := mustAcquire(t, b.Driver(), rq("k", "h", ex, time.Hour))
		names := []string{"a", "b", "c"}
		var cs []chan acquireResult
		ds := make(map[string]*memdriver.Driver)
		for _, n := range names {
			ds[n] = b.Driver()
			cs = append(cs, goAcquire(ctx, ds[n], rq("k", n, ex, time.Hour)))
			synctest.Wait() // queued before the next one starts
		}
		wantQueue(t, b, "k", names...)
		_, err := b.Driver().TryAcquire(ctx, rq("k", "newcomer", ex, time.Second))
		wantLocked(t, err, -1)

		time.Sleep(time.Minute) // nothing changes while nobody releases
		synctest.Wait()
		for i, c := range cs {
			if !pending(c) {
				t.Fatalf("waiter %s returned while the key was held", names[i])
			}
		}

		if err := b.Driver().Release(ctx, h); err != nil {
			t.Fatal(err)
		}
		last := h.Token
		for i, c := range cs {
			synctest.Wait()
			for j := i + 1; j < len(cs); j++ {
				if !pending(cs[j]) {
					t.Fatalf("waiter %s was served before %s", names[j], names[i])
				}
			}
			r := <-c
			if r.err != nil {
				t.Fatalf("waiter %s: %v", names[i], r.err)
			}
			if r.l.Owner != names[i] || r.l.Token <= last {
				t.Fatalf("waiter %s got %+v after token %d", names[i], r.l, last)
			}
			last = r.l.Token
			if got := owners(b, "k"); !slices.Equal(got, []string{names[i]}) {
				t.Fatalf("holders = %v, want %s", got, names[i])
			}
			wantQueue(t, b, "k", names[i+1:]...)
			if err := ds[names[i]].Release(ctx, r.l); err != nil {
				t.Fatal(err)
			}
		}
		if got := b.Stats().Acquire; got != 3 {
			t.Errorf("Stats.Acquire = %d, want 3 (one per call, not per wake-up)", got)
		}
	})
}

// TestAcquireSharedRun checks that a run of shared waiters at the head is
// granted together, and that the writer behind them holds back the
// readers behind it.
func TestAcquireSharedRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		b := d.Backend()
		ctx := context.Background()
		h := mustAcquire(t, d, rq("k", "h", ex, time.Hour))
		reqs := []driver.Request{
			rq("k", "s1", sh, time.Hour),
			rq("k", "s2", sh, time.Hour),
			rq("k", "x", ex, time.Hour),
			rq("k", "s3", sh, time.Hour),
		}
		cs := map[string]chan acquireResult{}
		for _, r := range reqs {
			cs[r.Owner] = goAcquire(ctx, d, r)
			synctest.Wait()
		}
		wantQueue(t, b, "k", "s1", "s2", "x", "s3")
		if err := d.Release(ctx, h); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		l1, l2 := <-cs["s1"], <-cs["s2"]
		if l1.err != nil || l2.err != nil {
			t.Fatal(l1.err, l2.err)
		}
		if !pending(cs["x"]) || !pending(cs["s3"]) {
			t.Fatal("the writer or the reader behind it was served with the readers ahead")
		}
		_, err := d.TryAcquire(ctx, rq("k", "s4", sh, time.Hour))
		wantLocked(t, err, -1)
		d.Release(ctx, l1.l)
		synctest.Wait()
		if !pending(cs["x"]) {
			t.Fatal("writer served while a reader holds the key")
		}
		d.Release(ctx, l2.l)
		lx := <-cs["x"]
		if lx.err != nil {
			t.Fatal(lx.err)
		}
		synctest.Wait()
		if !pending(cs["s3"]) {
			t.Fatal("reader served while the writer holds the key")
		}
		d.Release(ctx, lx.l)
		if l3 := <-cs["s3"]; l3.err != nil || l3.l.Token <= lx.l.Token {
			t.Fatalf("s3: %+v", l3)
		}
	})
}

// TestAcquireWakesOnExpiry checks that a waiter notices, on its own timer,
// holds and queue entries that run out without anybody announcing it.
func TestAcquireWakesOnExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		b := d.Backend()
		ctx := context.Background()
		mustAcquire(t, d, rq("k", "h", ex, 2*time.Second))
		// A queued owner that never comes back (a crashed process).
		_, err := tryQueued(d, ctx, rq("k", "q", ex, 5*time.Second))
		wantLocked(t, err, 2*time.Second)
		start := time.Now()
		r := <-goAcquire(ctx, d, rq("k", "a", ex, time.Hour))
		if r.err != nil {
			t.Fatal(r.err)
		}
		if got := r.at.Sub(start); got != 5*time.Second {
			t.Fatalf("granted after %v, want 5s, when the dead entry ahead ran out", got)
		}
		if got := b.Stats().Acquire; got != 1 {
			t.Fatalf("Stats.Acquire = %d", got)
		}
	})
}

// TestAcquireEntryDoesNotExpire checks that an Acquire that waits longer
// than its TTL keeps its place: its entry is pinned while it waits.
func TestAcquireEntryDoesNotExpire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		b := d.Backend()
		ctx := context.Background()
		h := mustAcquire(t, d, rq("k", "h", ex, time.Hour))
		c := goAcquire(ctx, d, rq("k", "a", ex, time.Second))
		synctest.Wait()
		time.Sleep(10 * time.Minute)
		wantQueue(t, b, "k", "a")
		// A newcomer learns how long the waiter ahead would last, were
		// it to stop waiting now: its TTL (and the holder's lease).
		_, err := d.TryAcquire(ctx, rq("k", "n", ex, time.Second))
		wantLocked(t, err, 50*time.Minute)
		d.Release(ctx, h)
		_, err = d.TryAcquire(ctx, rq("k", "n", ex, time.Second))
		if r := <-c; r.err != nil || r.l.Owner != "a" {
			t.Fatalf("waiter: %+v", r)
		}
		if err == nil {
			t.Fatal("newcomer overtook the waiter")
		}
	})
}

func TestAcquireContextDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		d := b.Driver()
		h := mustAcquire(t, d, rq("k", "h", ex, time.Hour))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		ca := goAcquire(ctx, b.Driver(), rq("k", "a", ex, time.Hour))
		synctest.Wait()
		cb := goAcquire(context.Background(), b.Driver(), rq("k", "b", ex, time.Hour))
		synctest.Wait()
		wantQueue(t, b, "k", "a", "b")

		start := time.Now()
		ra := <-ca
		if !errors.Is(ra.err, context.DeadlineExceeded) {
			t.Fatalf("Acquire with a context that times out = %+v; want an error wrapping DeadlineExceeded", ra)
		}
		if got := ra.at.Sub(start); got != time.Second {
			t.Fatalf("Acquire returned %v after the start, want when its context ended (1s)", got)
		}
		wantQueue(t, b, "k", "b")
		if got := owners(b, "k"); !slices.Equal(got, []string{"h"}) {
			t.Fatalf("holders = %v", got)
		}
		d.Release(context.Background(), h)
		if rb := <-cb; rb.err != nil || rb.l.Owner != "b" {
			t.Fatalf("b: %+v", rb)
		}

		// A done context is refused without reaching the backend.
		before := b.Stats()
		_, err := d.Acquire(ctx, rq("k2", "c", ex, time.Second))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire with a done context: %v", err)
		}
		if b.Stats() != before {
			t.Fatal("Acquire with a done context reached the backend")
		}
		wantQueue(t, b, "k2")
		if b.Holders("k2") != nil {
			t.Fatal("Acquire with a done context left a hold")
		}
	})
}

// TestAcquireHeadLeavesWakesNext checks that the waiter behind a head that
// gives up is served as soon as the key is free.
func TestAcquireHeadLeavesWakesNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		b := d.Backend()
		ctx := context.Background()
		// A queued owner at the head keeps the free key from the waiter.
		h := mustAcquire(t, d, rq("k", "h", ex, time.Hour))
		_, err := tryQueued(d, ctx, rq("k", "q", ex, time.Hour))
		wantLocked(t, err, -1)
		d.Release(ctx, h)
		c := goAcquire(ctx, d, rq("k", "a", ex, time.Hour))
		synctest.Wait()
		if !pending(c) {
			t.Fatal("waiter overtook the queued owner")
		}
		wantQueue(t, b, "k", "q", "a")
		// The head leaves: the waiter is granted at once.
		start := time.Now()
		wantNotHeld(t, d.Release(ctx, driver.Lease{Key: "k", Owner: "q", Mode: ex, Abandoned: true}))
		r := <-c
		if r.err != nil || r.at != start {
			t.Fatalf("waiter: %+v, %v after the head left", r, r.at.Sub(start))
		}
	})
}

func TestAcquireFaultHooks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		d := b.Driver()
		ctx := context.Background()

		// FailNext: the call never reaches the backend.
		d.FailNext(1, nil)
		if _, err := d.Acquire(ctx, rq("k", "a", ex, time.Second)); !errors.Is(err, memdriver.ErrInjected) {
			t.Fatalf("Acquire after FailNext: %v", err)
		}
		if b.Calls() != 0 || b.Queued("k") != nil || b.Holders("k") != nil {
			t.Fatalf("a failed Acquire reached the backend: %+v", b.Stats())
		}

		// Block: the call waits for Unblock, or for its context.
		d.Block()
		c := goAcquire(ctx, d, rq("k", "a", ex, time.Second))
		time.Sleep(time.Minute)
		synctest.Wait()
		if !pending(c) || b.Calls() != 0 {
			t.Fatal("Acquire went through a blocked driver")
		}
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if _, err := d.Acquire(tctx, rq("k", "b", ex, time.Second)); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("blocked Acquire whose context times out: %v", err)
		}
		d.Unblock()
		if r := <-c; r.err != nil || r.l.Owner != "a" {
			t.Fatalf("Acquire after Unblock: %+v", r)
		}
		if got := b.Stats(); got.Acquire != 1 || got.Total() != 1 {
			t.Fatalf("Stats = %+v, want only the unblocked Acquire", got)
		}

		// LoseReplies: the grant stays on the backend.
		d.LoseReplies(1)
		if _, err := d.Acquire(ctx, rq("k2", "c", ex, time.Second)); !errors.Is(err, memdriver.ErrReplyLost) {
			t.Fatalf("Acquire with a lost reply: %v", err)
		}
		if got := owners(b, "k2"); !slices.Equal(got, []string{"c"}) {
			t.Fatalf("holders after a lost Acquire reply = %v, want c", got)
		}
	})
}

// TestAcquireManyWaiters hammers one key with Acquire from several
// drivers, with the race detector watching: no two holders at once, and
// every call granted.
func TestAcquireManyWaiters(t *testing.T) {
	b := memdriver.NewBackend()
	ctx := context.Background()
	var holders atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		d := b.Driver()
		wg.Go(func() {
			for n := range 50 {
				l, err := d.Acquire(ctx, rq("k", fmt.Sprintf("%d-%d", i, n), ex, time.Minute))
				if err != nil {
					t.Error(err)
					return
				}
				if holders.Add(1) != 1 {
					t.Error("two holders at once")
				}
				holders.Add(-1)
				if err := d.Release(ctx, l); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Holders("k") != nil || b.Queued("k") != nil {
		t.Fatalf("left behind: holders %+v, queue %v", b.Holders("k"), b.Queued("k"))
	}
}

// lossRecorder collects the calls of a WatchLoss callback.
type lossRecorder struct {
	mu   sync.Mutex
	errs []error
}

func (r *lossRecorder) lost(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

func (r *lossRecorder) calls() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.errs)
}

func TestWatchLossExpire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		b := d.Backend()
		l := mustAcquire(t, d, rq("k", "a", ex, time.Hour))
		other := mustAcquire(t, d, rq("k2", "a", ex, time.Hour))
		var rec, rec2 lossRecorder
		stop := d.WatchLoss(l, func(err error) {
			// Not under the backend's lock: calling it does not deadlock.
			b.Holders("k")
			rec.lost(err)
		})
		defer stop()
		stop2 := d.WatchLoss(other, rec2.lost)
		defer stop2()
		synctest.Wait()
		if n := len(rec.calls()); n != 0 {
			t.Fatalf("lost called %d times for a live hold", n)
		}
		b.Expire("k")
		synctest.Wait()
		errs := rec.calls()
		if len(errs) != 1 || !errors.Is(errs[0], driver.ErrNotHeld) {
			t.Fatalf("lost calls after Expire = %v, want one wrapping ErrNotHeld", errs)
		}
		b.Expire("k")
		synctest.Wait()
		if n := len(rec.calls()); n != 1 {
			t.Fatalf("lost called %d times, want once", n)
		}
		if n := len(rec2.calls()); n != 0 {
			t.Fatalf("the watch of another key's hold was called %d times", n)
		}
		if got := b.Stats().WatchLoss; got != 2 {
			t.Fatalf("Stats.WatchLoss = %d, want 2", got)
		}
	})
}

func TestWatchLossRevoke(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		b := d.Backend()
		ctx := context.Background()
		r1 := mustAcquire(t, d, rq("k", "r1", sh, time.Hour))
		r2 := mustAcquire(t, d, rq("k", "r2", sh, time.Hour))
		var rec1, rec2 lossRecorder
		defer d.WatchLoss(r1, rec1.lost)()
		defer d.WatchLoss(r2, rec2.lost)()
		sub, _ := d.Subscribe(ctx, "k")
		defer sub.Close()

		if b.Revoke("k", "nobody") || b.Revoke("other", "r1") {
			t.Fatal("Revoke of a hold that does not exist reported true")
		}
		if !b.Revoke("k", "r1") {
			t.Fatal("Revoke of a live hold reported false")
		}
		synctest.Wait()
		if errs := rec1.calls(); len(errs) != 1 || !errors.Is(errs[0], driver.ErrNotHeld) {
			t.Fatalf("revoked hold's watch: %v", errs)
		}
		if n := len(rec2.calls()); n != 0 {
			t.Fatalf("the other reader's watch was called %d times", n)
		}
		if !woken(sub) {
			t.Fatal("Revoke did not wake the key's subscribers")
		}
		if got := owners(b, "k"); !slices.Equal(got, []string{"r2"}) {
			t.Fatalf("holders after Revoke = %v", got)
		}
		_, err := d.Refresh(ctx, r1)
		wantNotHeld(t, err)
		if b.Revoke("k", "r1") {
			t.Fatal("second Revoke reported true")
		}
		// The fence counter survives.
		d.Release(ctx, r2)
		if l := mustAcquire(t, d, rq("k", "x", ex, time.Hour)); l.Token != 3 {
			t.Fatalf("token after Revoke = %d, want 3", l.Token)
		}
	})
}

func TestWatchLossNotOnRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		ctx := context.Background()
		l := mustAcquire(t, d, rq("k", "a", ex, time.Second))
		var rec lossRecorder
		stop := d.WatchLoss(l, rec.lost)
		// Released first, stopped after, as a careless caller might.
		if err := d.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		d.Backend().Holders("k")
		d.Backend().Expire("k")
		synctest.Wait()
		stop()
		stop() // more than once is fine
		if n := len(rec.calls()); n != 0 {
			t.Fatalf("lost called %d times after a normal Release", n)
		}
	})
}

// TestWatchLossLazyExpiry checks that an expired hold is reported when the
// backend notices the expiry, that is when something touches the key.
func TestWatchLossLazyExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		l := mustAcquire(t, d, rq("k", "a", ex, time.Second))
		var rec lossRecorder
		defer d.WatchLoss(l, rec.lost)()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := len(rec.calls()); n != 0 {
			t.Fatalf("lost called %d times before anything touched the key (no timers)", n)
		}
		_, err := d.TryAcquire(context.Background(), rq("k", "b", ex, time.Second))
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if errs := rec.calls(); len(errs) != 1 || !errors.Is(errs[0], driver.ErrNotHeld) {
			t.Fatalf("lost calls after the expiry was noticed = %v", errs)
		}
	})
}

func TestWatchLossNotHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		l := mustAcquire(t, d, rq("k", "a", ex, time.Hour))
		for name, bad := range map[string]driver.Lease{
			"never granted": {Key: "k2", Owner: "a", Mode: ex, Token: 1},
			"wrong token":   {Key: "k", Owner: "a", Mode: ex, Token: l.Token + 1},
			"wrong mode":    {Key: "k", Owner: "a", Mode: sh, Token: l.Token},
			"wrong owner":   {Key: "k", Owner: "b", Mode: ex, Token: l.Token},
		} {
			var rec lossRecorder
			stop := d.WatchLoss(bad, rec.lost)
			synctest.Wait()
			if errs := rec.calls(); len(errs) != 1 || !errors.Is(errs[0], driver.ErrNotHeld) {
				t.Errorf("%s: lost calls = %v, want one at once", name, errs)
			}
			stop()
		}
		// Token 0 is no grant's token: the watch reports the loss at once.
		var rec lossRecorder
		defer d.WatchLoss(driver.Lease{Key: "k", Owner: "a", Mode: ex}, rec.lost)()
		synctest.Wait()
		if n := len(rec.calls()); n != 1 {
			t.Fatalf("token-0 watch of a live hold called %d times, want 1", n)
		}
	})
}

func TestWatchLossStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		l := mustAcquire(t, d, rq("k", "a", ex, time.Hour))
		var rec lossRecorder
		stop := d.WatchLoss(l, rec.lost)
		stop()
		d.Backend().Expire("k")
		synctest.Wait()
		if n := len(rec.calls()); n != 0 {
			t.Fatalf("lost called %d times after stop", n)
		}
		stop()
	})
}

// TestWatchLossStopWaitsForCallback checks that lost is never running or
// called once stop has returned, even when they race. It runs in real time:
// stop may wait on a mutex, which synctest does not count as blocked.
func TestWatchLossStopWaitsForCallback(t *testing.T) {
	d := memdriver.New()
	b := d.Backend()
	l := mustAcquire(t, d, rq("k", "a", ex, time.Hour))
	entered, release := make(chan struct{}), make(chan struct{})
	stop := d.WatchLoss(l, func(error) {
		close(entered)
		<-release
	})
	b.Expire("k")
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("lost not called after Expire")
	}
	stopped := make(chan struct{})
	go func() {
		stop()
		close(stopped)
	}()
	select {
	case <-stopped:
		t.Fatal("stop returned while lost was running")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	<-stopped

	// Race stops with losses: lost never runs after its stop returned.
	for i := range 200 {
		owner := fmt.Sprintf("o%d", i)
		l := mustAcquire(t, d, rq("race", owner, ex, time.Hour))
		var stoppedFlag atomic.Bool
		var late atomic.Bool
		stop := d.WatchLoss(l, func(error) {
			if stoppedFlag.Load() {
				late.Store(true)
			}
		})
		go b.Revoke("race", owner)
		stop()
		stoppedFlag.Store(true)
		time.Sleep(10 * time.Microsecond)
		if late.Load() {
			t.Fatalf("round %d: lost called after stop returned", i)
		}
		d.Release(context.Background(), l)
	}
}
