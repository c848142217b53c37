package locker_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/memdriver"
)

func TestReentrant_SameContextReenters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		d := b.Driver()
		c := locker.New(d)
		r := c.ReentrantMutex("acct/7")
		ctx, err := r.Lock(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		tok := r.Token(ctx)
		// Another handle of the same Client and key reenters through ctx.
		r2 := c.ReentrantMutex("acct/7")
		ctx2, err := r2.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if r2.Token(ctx2) != tok || r.Count(ctx) != 2 {
			t.Fatalf("reentry: token %d (want %d), count %d (want 2)", r2.Token(ctx2), tok, r.Count(ctx))
		}
		if err := r2.UnlockContext(ctx2); err != nil {
			t.Fatal(err)
		}
		if len(b.Holders("acct/7")) != 1 {
			t.Fatal("first of two unlocks released the key")
		}
		if err := r.UnlockContext(ctx); err != nil {
			t.Fatal(err)
		}
		if len(b.Holders("acct/7")) != 0 {
			t.Fatal("last unlock did not release the key")
		}
		if ctx.Err() == nil || !errors.Is(context.Cause(ctx), locker.ErrNotHeld) {
			t.Fatalf("hold context after the last Unlock: err %v cause %v", ctx.Err(), context.Cause(ctx))
		}
		checkErr(t, r.UnlockContext(ctx), "unlock", "acct/7", locker.ErrNotHeld)
	})
}

func TestReentrant_OtherContextsExclude(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		r := locker.NewReentrantMutex(b.Driver(), "acct/7")
		ctx, err := r.Lock(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		// Same goroutine, same handle, unrelated context: a new owner.
		if lctx, err := r.TryLock(context.Background()); lctx != nil || !errors.Is(err, locker.ErrLocked) {
			t.Fatalf("TryLock with an unrelated context = %v, %v; want nil and ErrLocked", lctx, err)
		}
		got := make(chan error)
		go func() {
			c, err := r.Lock(context.Background())
			if err == nil {
				err = r.UnlockContext(c)
			}
			got <- err
		}()
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("a second owner got in while the first held the key")
		default:
		}
		checkErr(t, r.UnlockContext(context.Background()), "unlock", "acct/7", locker.ErrNotHeld)
		// The misuse that could leak a hold for ever panics instead.
		mustPanic(t, func() { r.Unlock(context.Background()) })
		if r.Count(ctx) != 1 {
			t.Fatalf("count after misuse = %d, want 1", r.Count(ctx))
		}
		if err := r.UnlockContext(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
	})
}

func TestReentrant_LossCancelsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		r := locker.NewReentrantMutex(b.Driver(), "acct/7", locker.WithTTL(time.Second))
		ctx, err := r.Lock(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		inner, err := r.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b.Expire("acct/7")
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), locker.ErrLost) {
			t.Fatalf("cause = %v, want ErrLost", context.Cause(ctx))
		}
		if _, err := r.Lock(ctx); !errors.Is(err, locker.ErrLost) {
			t.Fatalf("reentry after loss = %v, want ErrLost", err)
		}
		// Loss frees the key for other owners at once, while this one
		// still needs its unlocks.
		other, err := r.Lock(context.Background())
		if err != nil {
			t.Fatalf("another owner after the loss: %v", err)
		}
		r.UnlockContext(other)
		checkErr(t, r.UnlockContext(inner), "unlock", "acct/7", locker.ErrLost)
		checkErr(t, r.UnlockContext(ctx), "unlock", "acct/7", locker.ErrLost)
		checkErr(t, r.UnlockContext(ctx), "unlock", "acct/7", locker.ErrNotHeld)
		mustPanic(t, func() { r.Unlock(ctx) })
	})
}
