package locker_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/memdriver"
)

func ExampleSemaphore() {
	c := locker.New(memdriver.New())
	defer c.Close(context.Background())
	ctx := context.Background()

	// At most 3 exports run at once, across every process that uses the
	// key: each takes a weight by its size.
	exports := c.Semaphore("exports", 3)
	big, err := exports.Acquire(ctx, 2)
	if err != nil {
		panic(err)
	}
	defer big.Release(ctx)
	fmt.Println("big export holds", big.Weight(), "permits, token", big.Token())
	_, err = exports.TryAcquire(ctx, 2)
	fmt.Println("a second big export:", err)
	small, err := exports.TryAcquire(ctx, 1)
	if err != nil {
		panic(err)
	}
	defer small.Release(ctx)
	fmt.Println("a small one fits, token", small.Token())
	// Output:
	// big export holds 2 permits, token 1
	// a second big export: locker: tryacquire "exports": held by another owner
	// a small one fits, token 2
}

func ExampleElection() {
	drv := memdriver.New()
	ctx := context.Background()

	// Two processes campaign; the first is elected at once.
	a, b := locker.New(drv), locker.New(drv)
	defer a.Close(ctx)
	defer b.Close(ctx)

	lead, err := a.Election("scheduler").Campaign(ctx, "node-a:8080")
	if err != nil {
		panic(err)
	}
	l, _ := b.Election("scheduler").Leader(ctx)
	fmt.Printf("leader %s, term %d\n", l.Value, l.Term)

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		next, err := b.Election("scheduler").Campaign(ctx, "node-b:8080")
		if err != nil {
			panic(err)
		}
		fmt.Println("node-b elected with term", next.Token())
		next.Release(ctx)
	}()
	lead.Release(ctx) // resign: node-b takes over with a greater term
	wg.Wait()
	// Output:
	// leader node-a:8080, term 1
	// node-b elected with term 2
}

func ExampleMultiLock() {
	c := locker.New(memdriver.New())
	defer c.Close(context.Background())
	ctx := context.Background()

	// A transfer locks both accounts; another process transferring the
	// other way asks for ("accounts/9", "accounts/7") and cannot deadlock
	// with it: keys are locked in sorted order.
	mh, err := c.MultiLock([]string{"accounts/9", "accounts/7"}).Acquire(ctx)
	if err != nil {
		panic(err)
	}
	defer mh.Release(ctx)
	for _, h := range mh.Holds() {
		fmt.Println(h.Key(), "token", h.Token())
	}
	// Output:
	// accounts/7 token 1
	// accounts/9 token 1
}
