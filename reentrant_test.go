//go:build go1.25

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
		ctx, err := r.Enter(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		tok := r.Token(ctx)
		// Another handle of the same Client and key reenters through ctx.
		r2 := c.ReentrantMutex("acct/7")
		ctx2, err := r2.Enter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if r2.Token(ctx2) != tok || r.Count(ctx) != 2 {
			t.Fatalf("reentry: token %d (want %d), count %d (want 2)", r2.Token(ctx2), tok, r.Count(ctx))
		}
		if err := r2.Leave(ctx2); err != nil {
			t.Fatal(err)
		}
		if len(b.Holders("acct/7")) != 1 {
			t.Fatal("first of two Leaves released the key")
		}
		if err := r.Leave(ctx); err != nil {
			t.Fatal(err)
		}
		if len(b.Holders("acct/7")) != 0 {
			t.Fatal("last Leave did not release the key")
		}
		if ctx.Err() == nil || !errors.Is(context.Cause(ctx), locker.ErrNotHeld) {
			t.Fatalf("hold context after the last Leave: err %v cause %v", ctx.Err(), context.Cause(ctx))
		}
		// A Leave more than the Enters panics, as sync does.
		mustPanic(t, func() { r.Leave(ctx) })
	})
}

func TestReentrant_OtherContextsExclude(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		r := locker.NewReentrantMutex(b.Driver(), "acct/7")
		ctx, err := r.Enter(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		// Same goroutine, same handle, unrelated context: a new owner.
		if lctx, err := r.TryEnter(context.Background()); lctx != nil || !errors.Is(err, locker.ErrLocked) {
			t.Fatalf("TryEnter with an unrelated context = %v, %v; want nil and ErrLocked", lctx, err)
		}
		got := make(chan error)
		go func() {
			c, err := r.Enter(context.Background())
			if err == nil {
				err = r.Leave(c)
			}
			got <- err
		}()
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("a second owner got in while the first held the key")
		default:
		}
		// The misuse that could leak a hold for ever panics.
		mustPanic(t, func() { r.Leave(context.Background()) })
		if r.Count(ctx) != 1 {
			t.Fatalf("count after misuse = %d, want 1", r.Count(ctx))
		}
		if err := r.Leave(ctx); err != nil {
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
		ctx, err := r.Enter(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		inner, err := r.Enter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b.Expire("acct/7")
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), locker.ErrLost) {
			t.Fatalf("cause = %v, want ErrLost", context.Cause(ctx))
		}
		if _, err := r.Enter(ctx); !errors.Is(err, locker.ErrLost) {
			t.Fatalf("reentry after loss = %v, want ErrLost", err)
		}
		// Loss frees the key for other owners at once, while this one
		// still needs its Leaves.
		other, err := r.Enter(context.Background())
		if err != nil {
			t.Fatalf("another owner after the loss: %v", err)
		}
		r.Leave(other)
		checkErr(t, r.Leave(inner), "leave", "acct/7", locker.ErrLost)
		checkErr(t, r.Leave(ctx), "leave", "acct/7", locker.ErrLost)
		mustPanic(t, func() { r.Leave(ctx) })
	})
}
