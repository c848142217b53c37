//go:build go1.25

package memdriver_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
)

func subscribe(t *testing.T, d *memdriver.Driver, key string) driver.Subscription {
	t.Helper()
	s, err := d.Subscribe(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestNotifyOnRelease(t *testing.T) {
	b := memdriver.NewBackend()
	d, w := b.Driver(), b.Driver()
	ctx := context.Background()
	l := mustAcquire(t, d, rq("k", "a", ex, time.Minute))
	// A release before Subscribe is not reported.
	if err := d.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	s := subscribe(t, w, "k")
	other := subscribe(t, w, "other")
	if woken(s) {
		t.Error("woken by a release that happened before Subscribe")
	}
	l = mustAcquire(t, d, rq("k", "a", ex, time.Minute))
	if woken(s) {
		t.Error("woken by a grant")
	}
	if err := d.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	if !woken(s) {
		t.Error("not woken by a release")
	}
	if woken(other) {
		t.Error("subscriber of another key woken")
	}
	// A failed release wakes no one.
	wantNotHeld(t, d.Release(ctx, l))
	if woken(s) {
		t.Error("woken by a failed release")
	}
}

func TestNotifyCoalesces(t *testing.T) {
	d := memdriver.New()
	ctx := context.Background()
	s1 := subscribe(t, d, "k")
	s2 := subscribe(t, d, "k")
	for range 3 {
		l := mustAcquire(t, d, rq("k", "a", sh, time.Minute))
		if err := d.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range []driver.Subscription{s1, s2} {
		if !woken(s) {
			t.Errorf("subscription %d not woken", i)
		}
		if woken(s) {
			t.Errorf("subscription %d: wake-ups not coalesced", i)
		}
	}
}

func TestNotifyClose(t *testing.T) {
	d := memdriver.New()
	ctx := context.Background()
	s, err := d.Subscribe(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	l := mustAcquire(t, d, rq("k", "a", ex, time.Minute))
	if err := d.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	if woken(s) {
		t.Error("closed subscription woken")
	}
}

func TestNotifyOnQueueChange(t *testing.T) {
	d := memdriver.New()
	ctx := context.Background()
	h := mustAcquire(t, d, rq("k", "h", ex, time.Minute))
	for _, o := range []string{"a", "b"} {
		_, err := tryQueued(d, ctx, rq("k", o, ex, time.Minute))
		wantLocked(t, err, -1)
	}
	s := subscribe(t, d, "k")
	if err := d.Release(ctx, h); err != nil {
		t.Fatal(err)
	}
	if !woken(s) {
		t.Fatal("not woken by release")
	}
	// Joining or renewing a queue entry wakes no one.
	_, err := tryQueued(d, ctx, rq("k", "b", ex, time.Minute))
	wantLocked(t, err, -1)
	if woken(s) {
		t.Error("woken by a queue renewal")
	}
	// The head is granted and leaves the queue: b is now at the head.
	mustAcquireQueued(t, d, rq("k", "a", ex, time.Minute))
	if !woken(s) {
		t.Error("not woken when the head left the queue")
	}
}

func TestNotifyOnLazyExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		b := d.Backend()
		mustAcquire(t, d, rq("k", "a", ex, time.Second))
		s := subscribe(t, d, "k")
		time.Sleep(2 * time.Second)
		// Nothing runs in the background: nobody has noticed yet.
		if woken(s) {
			t.Fatal("woken with nobody touching the key")
		}
		// The first access drops the expired hold and wakes subscribers.
		if got := b.Holders("k"); got != nil {
			t.Fatalf("Holders = %+v", got)
		}
		if !woken(s) {
			t.Error("not woken when the expired hold was dropped")
		}
	})
}

func TestNotifyWaiterInBubble(t *testing.T) {
	// A waiter that blocks on its subscription is woken by a release from
	// another client, without polling.
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		holder, waiter := b.Driver(), b.Driver()
		ctx := context.Background()
		l := mustAcquire(t, holder, rq("k", "h", ex, time.Hour))
		got := make(chan driver.Lease)
		go func() {
			s, err := waiter.Subscribe(ctx, "k")
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close()
			for {
				l, err := waiter.TryAcquire(ctx, rq("k", "w", ex, time.Hour))
				if err == nil {
					got <- l
					return
				}
				<-s.C()
			}
		}()
		synctest.Wait()
		calls := b.Calls()
		time.Sleep(10 * time.Minute)
		if b.Calls() != calls {
			t.Errorf("waiter polled: %d calls while blocked", b.Calls()-calls)
		}
		if err := holder.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
		if wl := <-got; wl.Token != 2 {
			t.Errorf("waiter got token %d", wl.Token)
		}
	})
}
