package locker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/memdriver"
)

func Example() {
	// memdriver is an in-process backend; with Redis, drv comes from
	// redisdriver.New(rdb, nil) and the rest is the same.
	drv := memdriver.New()

	m := locker.NewMutex(drv, "orders/42", locker.WithTTL(10*time.Second))
	m.Lock()
	fmt.Println("holding orders/42 with fencing token", m.Token())
	m.Unlock()

	m.Lock()
	fmt.Println("holding it again with token", m.Token())
	m.Unlock()
	// Output:
	// holding orders/42 with fencing token 1
	// holding it again with token 2
}

func ExampleMutex_TryLock() {
	backend := memdriver.NewBackend()
	// Two drivers on one backend stand for two processes.
	a := locker.NewMutex(backend.Driver(), "nightly-report")
	b := locker.NewMutex(backend.Driver(), "nightly-report")

	fmt.Println("a:", a.TryLock())
	fmt.Println("b:", b.TryLock())
	a.Unlock()
	fmt.Println("b after a unlocked:", b.TryLock())
	b.Unlock()
	// Output:
	// a: true
	// b: false
	// b after a unlocked: true
}

func ExampleMutex_LockContext() {
	backend := memdriver.NewBackend()
	holder := locker.NewMutex(backend.Driver(), "migrations")
	holder.Lock()
	defer holder.Unlock()

	m := locker.NewMutex(backend.Driver(), "migrations")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := m.LockContext(ctx)
	fmt.Println(err)
	fmt.Println("deadline exceeded:", errors.Is(err, context.DeadlineExceeded))
	// Output:
	// locker: lock "migrations": context deadline exceeded
	// deadline exceeded: true
}

func ExampleMutex_Done() {
	backend := memdriver.NewBackend()
	m := locker.NewMutex(backend.Driver(), "leader", locker.WithTTL(300*time.Millisecond))
	m.Lock()

	backend.Expire("leader") // the backend drops the hold, as a partition or an operator might

	<-m.Done() // closed as soon as the driver reports the loss (or a renewal is rejected)
	fmt.Println("lost:", errors.Is(m.Err(), locker.ErrLost))
	err := m.UnlockContext(context.Background())
	fmt.Println("unlock reports the loss:", errors.Is(err, locker.ErrLost))
	// Output:
	// lost: true
	// unlock reports the loss: true
}

func ExampleRWMutex() {
	backend := memdriver.NewBackend()
	reader1 := locker.NewRWMutex(backend.Driver(), "config")
	reader2 := locker.NewRWMutex(backend.Driver(), "config")
	writer := locker.NewRWMutex(backend.Driver(), "config")

	reader1.RLock()
	reader2.RLock()
	fmt.Println("writer while two readers hold it:", writer.TryLock())
	reader1.RUnlock()
	reader2.RUnlock()
	fmt.Println("writer after they left:", writer.TryLock())
	writer.Unlock()
	// Output:
	// writer while two readers hold it: false
	// writer after they left: true
}

func ExampleReentrantMutex() {
	drv := memdriver.New()
	account := locker.NewReentrantMutex(drv, "account/7")

	transfer := func(ctx context.Context) error {
		// The caller's context carries the hold: this Lock reenters.
		ctx, err := account.Lock(ctx)
		if err != nil {
			return err
		}
		defer account.Unlock(ctx)
		fmt.Println("inner: token", account.Token(ctx), "depth", account.Count(ctx))
		return nil
	}

	ctx, err := account.Lock(context.Background())
	if err != nil {
		panic(err)
	}
	fmt.Println("outer: token", account.Token(ctx), "depth", account.Count(ctx))
	if err := transfer(ctx); err != nil {
		panic(err)
	}
	fmt.Println("after inner unlock: depth", account.Count(ctx))

	// A context that does not carry the hold is another owner.
	_, ok, _ := account.TryLock(context.Background())
	fmt.Println("unrelated context gets it:", ok)
	account.Unlock(ctx)
	// Output:
	// outer: token 1 depth 1
	// inner: token 1 depth 2
	// after inner unlock: depth 1
	// unrelated context gets it: false
}

func ExampleGuard() {
	// The resource side of fencing: accept a write only with a token at
	// least as high as any seen before.
	var guard locker.Guard
	var mu sync.Mutex
	balance := 0
	write := func(tok locker.Token, v int) error {
		return guard.Do("balance", tok, func() error {
			mu.Lock()
			defer mu.Unlock()
			balance = v
			return nil
		})
	}
	fmt.Println(write(34, 100)) // the current holder
	fmt.Println(write(33, 50))  // a holder that was paused past its lease
	fmt.Println("balance:", balance)
	// Output:
	// <nil>
	// locker: resource "balance": token 33 is lower than 34: stale fencing token
	// balance: 100
}
