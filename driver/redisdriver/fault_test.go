package redisdriver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/internal/faultproxy"
	"github.com/go-locker/locker/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// TestFault_BlackholeWhileHolding cuts the holder off from Redis with the
// sockets left open: the holder must signal the loss before another client's
// Lock returns, in every run.
func TestFault_BlackholeWhileHolding(t *testing.T) {
	srv := realServer(t)
	for i := range 3 {
		p, err := faultproxy.New(srv.Addr)
		if err != nil {
			t.Fatal(err)
		}
		holderClient := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
		otherClient := newClient(t, srv.Addr)
		key := uniqueKey(t, "blackhole")
		ttl := 500 * time.Millisecond
		quiet := locker.WithErrorHandler(func(error) {})
		holder := locker.NewMutex(newDriver(t, holderClient), key, locker.WithTTL(ttl), quiet)
		other := locker.NewMutex(newDriver(t, otherClient), key, locker.WithTTL(ttl))
		if err := holder.LockContext(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		p.Blackhole(true)
		cut := time.Now()
		otherGot := make(chan time.Time, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*ttl)
			defer cancel()
			if err := other.LockContext(ctx); err != nil {
				t.Error(err)
				close(otherGot)
				return
			}
			otherGot <- time.Now()
		}()
		var lostAt time.Time
		select {
		case <-holder.Done():
			lostAt = time.Now()
		case <-time.After(10 * ttl):
			t.Fatal("holder never signalled the loss")
		}
		otherAt, ok := <-otherGot
		if !ok {
			t.FailNow()
		}
		t.Logf("run %d: loss signalled %v after the cut, successor acquired %v after it (headroom %v)",
			i, lostAt.Sub(cut).Round(time.Millisecond), otherAt.Sub(cut).Round(time.Millisecond), otherAt.Sub(lostAt).Round(time.Millisecond))
		if !lostAt.Before(otherAt) {
			t.Errorf("run %d: loss signalled %v after the successor acquired", i, lostAt.Sub(otherAt))
		}
		if !errors.Is(holder.Err(), locker.ErrLost) {
			t.Errorf("Err = %v", holder.Err())
		}
		if other.Token() <= holder.Token() {
			t.Errorf("successor token %d not above %d", other.Token(), holder.Token())
		}
		p.Heal()
		// Unlock after the loss must not touch the successor's hold.
		if err := holder.UnlockContext(ctxT(t)); !errors.Is(err, locker.ErrLost) {
			t.Errorf("unlock after loss = %v", err)
		}
		if ok, _ := locker.NewMutex(newDriver(t, otherClient), key).TryLockContext(ctxT(t)); ok {
			t.Error("the lost holder's unlock released the successor's hold")
		}
		if err := other.UnlockContext(ctxT(t)); err != nil {
			t.Error(err)
		}
		_ = holderClient.Close()
		_ = p.Close()
	}
}

// TestFault_ServerPauseShorterThanTTL stops redis-server for less than
// TTL minus the safety margin: no hold may be declared lost.
func TestFault_ServerPauseShorterThanTTL(t *testing.T) {
	srv := testserver.PrivateRedis(t)
	c := newClient(t, srv.Addr)
	d := newDriver(t, c)
	ttl := 2 * time.Second
	m := locker.NewMutex(d, "pause", locker.WithTTL(ttl), locker.WithErrorHandler(func(error) {}))
	if err := m.LockContext(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := srv.Pause(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(ttl / 4)
		if err := srv.Resume(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(ttl / 2)
	}
	if err := m.Err(); err != nil {
		t.Fatalf("false loss after short server pauses: %v", err)
	}
	if err := m.UnlockContext(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}
