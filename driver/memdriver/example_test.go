package memdriver_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
)

// Locks on the in-process backend: one Client, shared by every handle, as
// on any other backend.
func Example() {
	ctx := context.Background()
	c := locker.New(memdriver.New())
	defer c.Close(ctx)

	h, err := c.Mutex("orders/42").Acquire(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("holding orders/42 with fencing token", h.Token())
	if err := h.Release(ctx); err != nil {
		panic(err)
	}

	h, err = c.Mutex("orders/42").Acquire(ctx)
	if err != nil {
		panic(err)
	}
	defer h.Release(ctx)
	fmt.Println("again, with token", h.Token())
	// Output:
	// holding orders/42 with fencing token 1
	// again, with token 2
}

// Two clients of one backend stand for two processes. The fault hooks make
// one of them fail a call and then lose its lease.
func Example_faultHooks() {
	ctx := context.Background()
	backend := memdriver.NewBackend()
	worker, other := backend.Driver(), backend.Driver()

	// The worker's first attempt fails before reaching the backend.
	worker.FailNext(1, nil)
	req := driver.Request{Key: "jobs/42", Owner: "worker-1", Mode: driver.Exclusive, TTL: time.Minute}
	_, err := worker.TryAcquire(ctx, req)
	fmt.Println("first attempt:", err)
	fmt.Println("injected:", errors.Is(err, memdriver.ErrInjected))

	// The retry succeeds.
	lease, err := worker.TryAcquire(ctx, req)
	fmt.Println("second attempt:", lease.Token, err)

	// The other process finds the key held.
	_, err = other.TryAcquire(ctx, driver.Request{Key: "jobs/42", Owner: "worker-2", Mode: driver.Exclusive, TTL: time.Minute})
	fmt.Println("other locked:", errors.Is(err, driver.ErrLocked))

	// The lease runs out on the backend: the worker's refresh fails.
	backend.Expire("jobs/42")
	_, err = worker.Refresh(ctx, lease)
	fmt.Println("refresh:", err)
	fmt.Println("holders:", len(backend.Holders("jobs/42")))

	// Output:
	// first attempt: memdriver: try-acquire "jobs/42": injected failure
	// injected: true
	// second attempt: 1 <nil>
	// other locked: true
	// refresh: memdriver: refresh "jobs/42": lease not held
	// holders: 0
}

// LoseReplies models a reply lost on the network: the grant is applied,
// and retrying with the same owner returns the same lease.
func ExampleDriver_LoseReplies() {
	ctx := context.Background()
	d := memdriver.New()
	req := driver.Request{Key: "k", Owner: "o", Mode: driver.Exclusive, TTL: time.Minute}

	d.LoseReplies(1)
	_, err := d.TryAcquire(ctx, req)
	fmt.Println(errors.Is(err, memdriver.ErrReplyLost))
	fmt.Println(d.Backend().Holders("k")[0].Owner)

	lease, err := d.TryAcquire(ctx, req)
	fmt.Println(lease.Token, err)

	// Output:
	// true
	// o
	// 1 <nil>
}

// A subscription wakes a waiter when the key is released.
func ExampleDriver_Subscribe() {
	ctx := context.Background()
	d := memdriver.New()
	lease, _ := d.TryAcquire(ctx, driver.Request{Key: "k", Owner: "a", Mode: driver.Exclusive, TTL: time.Minute})

	sub, _ := d.Subscribe(ctx, "k")
	defer sub.Close()
	_ = d.Release(ctx, lease)

	select {
	case <-sub.C():
		fmt.Println("k may be free")
	default:
		fmt.Println("no wake-up")
	}
	// Output: k may be free
}
