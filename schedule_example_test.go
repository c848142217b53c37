package locker_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/memdriver"
)

// A job scheduled at the same time on several replicas runs once: each
// replica keys the lock by the job and its scheduled time, and keeps it for
// a minimum hold, so that a replica whose clock is late finds it still held
// after the first has finished. Close releases the key at the end of the
// minimum hold, and waits for it, so that a replica that stops gracefully
// leaves the key held for no longer than that.
func ExampleWithMinHold() {
	drv := memdriver.New()
	ctx := context.Background()
	early, late := locker.New(drv), locker.New(drv)
	defer early.Close(ctx)
	defer late.Close(ctx)

	// The tick of the run, as the scheduler planned it (not time.Now()).
	tick := time.Date(2026, 11, 26, 15, 0, 0, 0, time.UTC)
	key := "cron/report/" + strconv.FormatInt(tick.Unix(), 10)
	runOnce := func(c *locker.Client, who string) {
		h, err := c.Mutex(key, locker.WithTTL(time.Minute), locker.WithMinHold(time.Second)).TryAcquire(ctx)
		if errors.Is(err, locker.ErrLocked) {
			fmt.Println(who, "skips tick", tick.Format(time.TimeOnly))
			return
		}
		if err != nil {
			panic(err)
		}
		defer h.Release(ctx) // the key stays held until 1s after the grant
		fmt.Println(who, "runs tick", tick.Format(time.TimeOnly))
	}
	runOnce(early, "early replica")
	runOnce(late, "late replica") // after the early one has finished
	// Output:
	// early replica runs tick 15:00:00
	// late replica skips tick 15:00:00
}

// A LeaderLatch keeps a process in an election for as long as it runs, and
// answers IsLeader without waiting: the shape of a scheduler's leader
// check.
func ExampleElection_Latch() {
	drv := memdriver.New()
	ctx, cancel := context.WithCancel(context.Background())
	c := locker.New(drv)
	defer c.Close(context.Background())

	printed := make(chan struct{}, 1)
	latch, err := c.Election("scheduler").Latch(ctx, "node-a",
		locker.OnElected(func(h *locker.Hold) {
			fmt.Println("elected, term", h.Token())
			printed <- struct{}{}
		}),
		locker.OnOusted(func(err error) { fmt.Println("ousted:", err) }))
	if err != nil {
		panic(err)
	}
	if _, err := latch.Await(ctx); err != nil {
		panic(err)
	}
	<-printed // OnElected runs after Await has returned
	fmt.Println("leader:", latch.IsLeader())
	cancel() // resigns
	<-latch.Done()
	fmt.Println("leader:", latch.IsLeader())
	// Output:
	// elected, term 1
	// leader: true
	// ousted: <nil>
	// leader: false
}
