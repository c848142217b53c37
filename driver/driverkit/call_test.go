//go:build go1.25

package driverkit_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-locker/locker/driver/driverkit"
)

func TestCallResult(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	boom := errors.New("boom")
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"context that can end", ctx}, {"context that cannot end", context.Background()}} {
		v, err := driverkit.Call(c.ctx, func() (int, error) { return 7, boom }, func(int, error) { t.Errorf("%s: undo called for a result that was returned", c.name) })
		if v != 7 || err != boom {
			t.Errorf("%s: Call = %d, %v; want 7, boom", c.name, v, err)
		}
	}
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if _, err := driverkit.Call(done, func() (int, error) { t.Error("f called on a done context"); return 0, nil }, nil); err != context.Canceled {
		t.Errorf("done context: %v; want context.Canceled", err)
	}
}

// TestCallAbandoned checks that Call returns by ctx's deadline while f
// blocks, and that undo then gets f's result.
func TestCallAbandoned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		release := make(chan struct{})
		undone := make(chan int, 1)
		start := time.Now()
		_, err := driverkit.Call(ctx, func() (int, error) {
			<-release
			return 42, nil
		}, func(v int, err error) { undone <- v })
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Fatalf("Call = %v after %v; want DeadlineExceeded after 1s", err, time.Since(start))
		}
		close(release)
		synctest.Wait()
		select {
		case v := <-undone:
			if v != 42 {
				t.Errorf("undo got %d; want 42", v)
			}
		default:
			t.Error("undo not called after an abandoned call ended")
		}
	})
}
