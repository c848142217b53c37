//go:build go1.25

package locker

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-locker/locker/driver/memdriver"
)

// TestLatchPastDeadline: a leadership whose local deadline has passed is
// not reported, even before the watchdog, late on a busy machine, has
// declared the loss. The watchdog is made late by moving the deadline
// back behind its back.
func TestLatchPastDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(memdriver.New(), WithTTL(time.Second))
		defer c.Close(context.Background())
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		l, err := c.Election("e").Latch(ctx, "v")
		if err != nil {
			t.Fatal(err)
		}
		h, err := l.Await(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c.wd.mu.Lock()
		h.deadline = time.Now().Add(-time.Nanosecond)
		c.wd.mu.Unlock()
		if l.IsLeader() || l.Leadership() != nil {
			t.Error("IsLeader true past the leadership's local deadline")
		}
		if h.Err() != nil {
			t.Fatalf("the watchdog ran: %v; the test needs it not to have", h.Err())
		}
	})
}
