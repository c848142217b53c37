//go:build go1.25

package memdriver_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
)

func wantQueue(t *testing.T, b *memdriver.Backend, key string, want ...string) {
	t.Helper()
	if got := b.Queued(key); !slices.Equal(got, want) {
		t.Fatalf("Queued(%q) = %v, want %v", key, got, want)
	}
}

func TestQueueOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		b := d.Backend()
		ctx := context.Background()
		h := mustAcquire(t, d, rq("k", "h", ex, 10*time.Second))

		_, err := tryQueued(d, ctx, rq("k", "a", ex, 5*time.Second))
		wantLocked(t, err, 10*time.Second)
		_, err = tryQueued(d, ctx, rq("k", "b", ex, 20*time.Second))
		wantLocked(t, err, 10*time.Second)
		wantQueue(t, b, "k", "a", "b")
		// A further call keeps the owner's place, once.
		time.Sleep(time.Second)
		_, err = tryQueued(d, ctx, rq("k", "a", ex, 5*time.Second))
		wantLocked(t, err, 9*time.Second)
		wantQueue(t, b, "k", "a", "b")

		if err := d.Release(ctx, h); err != nil {
			t.Fatal(err)
		}
		// The key is free, but b is behind a, and newcomers behind both.
		_, err = tryQueued(d, ctx, rq("k", "b", ex, 20*time.Second))
		wantLocked(t, err, 5*time.Second) // a's entry
		_, err = d.TryAcquire(ctx, rq("k", "c", ex, time.Second))
		wantLocked(t, err, 20*time.Second) // the whole queue
		_, err = d.TryAcquire(ctx, rq("k", "c", sh, time.Second))
		wantLocked(t, err, 20*time.Second)
		wantQueue(t, b, "k", "a", "b")

		// The head is served, even through a plain TryAcquire, and leaves
		// the queue.
		la := mustAcquire(t, d, rq("k", "a", ex, time.Second))
		wantQueue(t, b, "k", "b")
		_, err = tryQueued(d, ctx, rq("k", "b", ex, 20*time.Second))
		wantLocked(t, err, time.Second)
		if err := d.Release(ctx, la); err != nil {
			t.Fatal(err)
		}
		mustAcquireQueued(t, d, rq("k", "b", ex, time.Second))
		wantQueue(t, b, "k")
	})
}

func TestQueueSharedRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		b := d.Backend()
		ctx := context.Background()
		h := mustAcquire(t, d, rq("k", "h", ex, time.Minute))
		for _, r := range []driver.Request{
			rq("k", "s1", sh, time.Minute),
			rq("k", "s2", sh, time.Minute),
			rq("k", "x", ex, time.Minute),
			rq("k", "s3", sh, time.Minute),
		} {
			_, err := tryQueued(d, ctx, r)
			wantLocked(t, err, -1)
		}
		wantQueue(t, b, "k", "s1", "s2", "x", "s3")
		if err := d.Release(ctx, h); err != nil {
			t.Fatal(err)
		}
		// s2 is in the shared run at the head: it need not wait for s1.
		mustAcquireQueued(t, d, rq("k", "s2", sh, time.Minute))
		wantQueue(t, b, "k", "s1", "x", "s3")
		// s3 is behind x; a shared newcomer is behind everyone.
		_, err := tryQueued(d, ctx, rq("k", "s3", sh, time.Minute))
		wantLocked(t, err, -1)
		_, err = d.TryAcquire(ctx, rq("k", "s4", sh, time.Minute))
		wantLocked(t, err, -1)
		ls1 := mustAcquire(t, d, rq("k", "s1", sh, time.Minute))
		wantQueue(t, b, "k", "x", "s3")
		// x is the head but the key is held shared.
		_, err = tryQueued(d, ctx, rq("k", "x", ex, time.Minute))
		wantLocked(t, err, time.Minute)
		// s3 is behind the exclusive head, although the holds are shared.
		_, err = tryQueued(d, ctx, rq("k", "s3", sh, time.Minute))
		wantLocked(t, err, -1)
		if err := d.Release(ctx, ls1); err != nil {
			t.Fatal(err)
		}
		if err := d.Release(ctx, driver.Lease{Key: "k", Owner: "s2", Mode: sh, Abandoned: true}); err != nil {
			t.Fatal(err)
		}
		lx := mustAcquireQueued(t, d, rq("k", "x", ex, time.Minute))
		wantQueue(t, b, "k", "s3")
		if err := d.Release(ctx, lx); err != nil {
			t.Fatal(err)
		}
		mustAcquireQueued(t, d, rq("k", "s3", sh, time.Minute))
		wantQueue(t, b, "k")
		// With the queue empty, shared newcomers join the holds.
		mustAcquire(t, d, rq("k", "s4", sh, time.Minute))
		if got := owners(b, "k"); !slices.Equal(got, []string{"s3", "s4"}) {
			t.Errorf("holders = %v", got)
		}
	})
}

func TestQueueExclusiveRequestNotInSharedRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		ctx := context.Background()
		h := mustAcquire(t, d, rq("k", "h", ex, time.Minute))
		for _, r := range []driver.Request{rq("k", "s1", sh, time.Minute), rq("k", "x", ex, time.Minute)} {
			_, err := tryQueued(d, ctx, r)
			wantLocked(t, err, -1)
		}
		if err := d.Release(ctx, h); err != nil {
			t.Fatal(err)
		}
		// x is second and exclusive: only s1 may go.
		_, err := tryQueued(d, ctx, rq("k", "x", ex, time.Minute))
		wantLocked(t, err, time.Minute)
		mustAcquireQueued(t, d, rq("k", "s1", sh, time.Minute))
	})
}

func TestQueueEntriesExpire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		b := d.Backend()
		ctx := context.Background()
		h := mustAcquire(t, d, rq("k", "h", ex, time.Minute))
		_, err := tryQueued(d, ctx, rq("k", "a", ex, 2*time.Second))
		wantLocked(t, err, time.Minute)
		_, err = tryQueued(d, ctx, rq("k", "b", ex, 2*time.Second))
		wantLocked(t, err, time.Minute)

		// a renews its entry; b does not. A plain TryAcquire renews
		// nothing.
		time.Sleep(time.Second)
		_, err = tryQueued(d, ctx, rq("k", "a", ex, 2*time.Second))
		wantLocked(t, err, 59*time.Second)
		_, err = d.TryAcquire(ctx, rq("k", "b", ex, 2*time.Second))
		wantLocked(t, err, 59*time.Second)
		time.Sleep(time.Second)
		wantQueue(t, b, "k", "a")
		time.Sleep(time.Second)
		wantQueue(t, b, "k")

		// With the queue gone, a newcomer is served.
		if err := d.Release(ctx, h); err != nil {
			t.Fatal(err)
		}
		mustAcquire(t, d, rq("k", "c", ex, time.Second))
	})
}

func TestQueueReleaseRemovesEntry(t *testing.T) {
	d := memdriver.New()
	b := d.Backend()
	ctx := context.Background()
	mustAcquire(t, d, rq("k", "h", ex, time.Minute))
	for _, o := range []string{"a", "b", "c"} {
		_, err := tryQueued(d, ctx, rq("k", o, ex, time.Minute))
		wantLocked(t, err, -1)
	}
	sub, err := d.Subscribe(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	// b never got the key: Release says so, but b leaves the queue.
	wantNotHeld(t, d.Release(ctx, driver.Lease{Key: "k", Owner: "b", Mode: ex, Abandoned: true}))
	wantQueue(t, b, "k", "a", "c")
	if !woken(sub) {
		t.Error("leaving the queue did not wake the subscriber")
	}
	// Whatever the lease's mode and token.
	wantNotHeld(t, d.Release(ctx, driver.Lease{Key: "k", Owner: "a", Mode: sh, Token: 42}))
	wantQueue(t, b, "k", "c")
	if got := owners(b, "k"); !slices.Equal(got, []string{"h"}) {
		t.Errorf("holders = %v", got)
	}
}

func TestQueueGrantedViaLostReply(t *testing.T) {
	// A queued owner is granted the key but the reply is lost; its
	// Release with token 0 gives the key up and lets the next one in.
	b := memdriver.NewBackend()
	d, other := b.Driver(), b.Driver()
	ctx := context.Background()
	h := mustAcquire(t, other, rq("k", "h", ex, time.Minute))
	_, err := tryQueued(d, ctx, rq("k", "a", ex, time.Minute))
	wantLocked(t, err, -1)
	_, err = tryQueued(other, ctx, rq("k", "b", ex, time.Minute))
	wantLocked(t, err, -1)
	if err := other.Release(ctx, h); err != nil {
		t.Fatal(err)
	}
	d.LoseReplies(1)
	if _, err := tryQueued(d, ctx, rq("k", "a", ex, time.Minute)); err == nil {
		t.Fatal("reply not lost")
	}
	if err := d.Release(ctx, driver.Lease{Key: "k", Owner: "a", Mode: ex, Abandoned: true}); err != nil {
		t.Fatal(err)
	}
	mustAcquireQueued(t, other, rq("k", "b", ex, time.Minute))
}
