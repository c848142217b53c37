package gocronlock_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/memdriver"
	"github.com/go-locker/locker/gocronlock"
)

// Three replicas schedule the same job for the same time; one runs it. In
// production each replica is a process with a Client on a shared backend
// (Redis, etcd, SQL…), and the job is a gocron.CronJob: at every tick the
// first replica to take the job's key runs it, and the key stays held for
// the minimum hold, here half the interval of a job every second.
func Example() {
	backend := memdriver.NewBackend() // in-process, for the example
	ctx := context.Background()

	var mu sync.Mutex
	runs := 0
	tick := time.Now().Add(200 * time.Millisecond)
	var replicas []gocron.Scheduler
	for range 3 {
		c := locker.New(backend.Driver(), locker.WithTTL(time.Second))
		defer c.Close(ctx)
		s, err := gocron.NewScheduler(gocron.WithDistributedLocker(gocronlock.NewLocker(c, 500*time.Millisecond)))
		if err != nil {
			panic(err)
		}
		_, err = s.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartDateTime(tick)), gocron.NewTask(func() {
			mu.Lock()
			runs++
			mu.Unlock()
		}), gocron.WithName("report")) // locks "cron/report"
		if err != nil {
			panic(err)
		}
		s.Start()
		replicas = append(replicas, s)
	}
	time.Sleep(time.Until(tick) + 300*time.Millisecond)
	for _, s := range replicas {
		s.Shutdown()
	}
	fmt.Println("runs:", runs)
	// Output: runs: 1
}

// Two replicas elect a leader, which runs every job; the other takes
// over within the election's TTL if the leader goes away.
func ExampleNewElector() {
	backend := memdriver.NewBackend()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var mu sync.Mutex
	var ran []string
	tick := time.Now().Add(200 * time.Millisecond)
	var replicas []gocron.Scheduler
	for _, name := range []string{"a", "b"} {
		c := locker.New(backend.Driver())
		defer c.Close(context.Background())
		el, err := gocronlock.NewElector(ctx, c.Election("cron/leader", locker.WithTTL(2*time.Second)), name, 0)
		if err != nil {
			panic(err)
		}
		if name == "a" {
			el.Latch().Await(ctx) // a leads, for a predictable output
		}
		s, err := gocron.NewScheduler(gocron.WithDistributedElector(el))
		if err != nil {
			panic(err)
		}
		_, err = s.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartDateTime(tick)), gocron.NewTask(func() {
			mu.Lock()
			ran = append(ran, name)
			mu.Unlock()
		}))
		if err != nil {
			panic(err)
		}
		s.Start()
		replicas = append(replicas, s)
	}
	time.Sleep(time.Until(tick) + 300*time.Millisecond)
	for _, s := range replicas {
		s.Shutdown()
	}
	fmt.Println("ran on:", ran)
	// Output: ran on: [a]
}
