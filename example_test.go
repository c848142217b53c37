package locker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/memdriver"
)

func Example() {
	// memdriver is an in-process backend; with Redis, drv comes from
	// redisdriver.New(rdb, nil) and the rest is the same.
	drv := memdriver.New()

	// One Client per driver: it renews the holds of all its handles,
	// lines up this process's waiters, and releases everything on Close.
	c := locker.New(drv, locker.WithTTL(10*time.Second))
	defer c.Close(context.Background())

	m := c.Mutex("orders/42") // a sync.Locker
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

func ExampleMutex_Acquire() {
	c := locker.New(memdriver.New())
	defer c.Close(context.Background())

	h, err := c.Mutex("reports/daily").Acquire(context.Background())
	if err != nil {
		panic(err)
	}
	defer h.Release(context.Background())

	// Work under h.Context() stops when the hold ends (lost, released, or
	// ended by Close); pass the token to every write that needs fencing.
	work := func(ctx context.Context, token locker.Token) error {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		default:
			fmt.Println("writing the report with fencing token", token)
			return nil
		}
	}
	if err := work(h.Context(), h.Token()); err != nil {
		fmt.Println("stopped:", err)
	}
	// Output:
	// writing the report with fencing token 1
}

func ExampleClient_Close() {
	backend := memdriver.NewBackend()

	// Close the Client when the process is told to stop: every hold it
	// granted is released at once, instead of blocking others until its
	// lease runs out.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c := locker.New(backend.Driver())

	h, err := c.Mutex("jobs/cleanup").Acquire(ctx)
	if err != nil {
		panic(err)
	}
	go stop() // here, the signal: in a real program, SIGTERM
	<-ctx.Done()

	closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fmt.Println("close:", c.Close(closeCtx))
	<-h.Done()
	fmt.Println("hold ended:", h.Err())
	fmt.Println("holders left on the backend:", len(backend.Holders("jobs/cleanup")))
	// Output:
	// close: <nil>
	// hold ended: locker: hold "jobs/cleanup": client closed
	// holders left on the backend: 0
}

func ExampleWithFixedLease() {
	backend := memdriver.NewBackend()
	c := locker.New(backend.Driver())
	defer c.Close(context.Background())

	// No watchdog: the hold lasts its TTL unless refreshed, like a lock
	// with a lease time.
	m := c.Mutex("cache/warmup", locker.WithTTL(100*time.Millisecond), locker.WithFixedLease())
	h, err := m.Acquire(context.Background())
	if err != nil {
		panic(err)
	}
	<-h.Done()
	fmt.Println("lost:", errors.Is(h.Err(), locker.ErrLost))
	fmt.Println("unlock reports it:", errors.Is(m.UnlockContext(context.Background()), locker.ErrLost))
	// Output:
	// lost: true
	// unlock reports it: true
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
	c := locker.New(memdriver.New())
	defer c.Close(context.Background())
	account := c.ReentrantMutex("account/7")

	transfer := func(ctx context.Context) (err error) {
		// The caller's context carries the hold: this Enter reenters.
		ctx, err = account.Enter(ctx)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, account.Leave(ctx)) }()
		fmt.Println("inner: token", account.Token(ctx), "depth", account.Count(ctx))
		return nil
	}

	ctx, err := account.Enter(context.Background())
	if err != nil {
		panic(err)
	}
	fmt.Println("outer: token", account.Token(ctx), "depth", account.Count(ctx))
	if err := transfer(ctx); err != nil {
		panic(err)
	}
	fmt.Println("after inner leave: depth", account.Count(ctx))

	// A context that does not carry the hold is another owner.
	_, err = account.TryEnter(context.Background())
	fmt.Println("unrelated context:", err)
	if err := account.Leave(ctx); err != nil {
		panic(err)
	}
	// Output:
	// outer: token 1 depth 1
	// inner: token 1 depth 2
	// after inner leave: depth 1
	// unrelated context: locker: tryenter "account/7": held by another owner
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

func ExampleErrZeroValue() {
	// A Mutex that no constructor made has no backend to lock.
	var m locker.Mutex
	err := m.LockContext(context.Background())
	fmt.Println(err)
	fmt.Println(errors.Is(err, locker.ErrZeroValue))
	// Output:
	// locker: lock: zero value of locker.Mutex: make it with NewMutex or Client.Mutex
	// true
}

func ExampleRWMutex_TryRAcquire() {
	c := locker.New(memdriver.New())
	defer c.Close(context.Background())
	ctx := context.Background()

	w, err := c.RWMutex("config").Acquire(ctx)
	if err != nil {
		panic(err)
	}
	// The hold form of a try reports a taken key as an error.
	_, err = c.RWMutex("config").TryRAcquire(ctx)
	fmt.Println("while written:", errors.Is(err, locker.ErrLocked))
	w.Release(ctx)
	r, err := c.RWMutex("config").TryRAcquire(ctx)
	fmt.Println("after:", err, r.Shared())
	r.Release(ctx)
	// Output:
	// while written: true
	// after: <nil> true
}
