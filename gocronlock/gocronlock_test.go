package gocronlock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/memdriver"
	"github.com/go-locker/locker/gocronlock"
)

func TestLocker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		ctx := context.Background()
		c1, c2 := locker.New(b.Driver()), locker.New(b.Driver())
		defer c1.Close(ctx)
		defer c2.Close(ctx)
		l1, l2 := gocronlock.NewLocker(c1, 500*time.Millisecond), gocronlock.NewLocker(c2, 500*time.Millisecond)

		lk, err := l1.Lock(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		if got := b.Holders(gocronlock.KeyPrefix + "job"); len(got) != 1 {
			t.Fatalf("holders of %q: %v; want one", gocronlock.KeyPrefix+"job", got)
		}
		if _, err := l2.Lock(ctx, "job"); !errors.Is(err, locker.ErrLocked) {
			t.Fatalf("second replica's Lock: %v; want ErrLocked", err)
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(499 * time.Millisecond)
		if _, err := l2.Lock(ctx, "job"); !errors.Is(err, locker.ErrLocked) {
			t.Fatalf("Lock 499ms after the first, which was unlocked at once: %v; want ErrLocked (min hold 500ms)", err)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		lk2, err := l2.Lock(ctx, "job")
		if err != nil {
			t.Fatalf("Lock after the minimum hold: %v", err)
		}
		lk2.Unlock(ctx)

		if _, err := gocronlock.NewLocker(c1, time.Minute).Lock(ctx, "other"); !errors.Is(err, locker.ErrInvalidOption) {
			t.Errorf("Lock with a minimum hold above the TTL: %v; want ErrInvalidOption", err)
		}
	})
}

func TestElector(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		c := locker.New(b.Driver())
		defer c.Close(context.Background())
		el, err := gocronlock.NewElector(ctx, c.Election("cron/leader"), "me", 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := el.Latch().Await(ctx); err != nil {
			t.Fatal(err)
		}
		if err := el.IsLeader(ctx); !errors.Is(err, gocronlock.ErrNotLeader) {
			t.Errorf("IsLeader within the settle time: %v; want ErrNotLeader", err)
		}
		time.Sleep(100 * time.Millisecond)
		if err := el.IsLeader(ctx); err != nil {
			t.Errorf("IsLeader after the settle time: %v; want nil", err)
		}
		cancel()
		<-el.Latch().Done()
		if err := el.IsLeader(ctx); !errors.Is(err, gocronlock.ErrNotLeader) {
			t.Errorf("IsLeader after the latch stopped: %v; want ErrNotLeader", err)
		}
	})
}
