package driverkit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/go-locker/locker/driver/driverkit"
)

// A backend whose names cannot hold '/' nor spaces: every other byte
// stands for itself, '%' and those two are escaped.
func ExampleEscaper() {
	e := driverkit.Escaper{Keep: func(c byte) bool { return c != '/' && c != ' ' }}
	name := e.Escape("orders/42 eu%")
	key, err := e.Unescape(name)
	fmt.Println(name)
	fmt.Println(key, err)
	// Output:
	// orders%2F42%20eu%25
	// orders/42 eu% <nil>
}

// A client call that takes no context returns by the context's deadline;
// undo learns what the abandoned call did.
func ExampleCall() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	created := make(chan string, 1)
	_, err := driverkit.Call(ctx, func() (string, error) {
		time.Sleep(50 * time.Millisecond) // a slow server
		return "/locks/k/n-0001", nil
	}, func(path string, err error) { created <- path })
	fmt.Println(err)
	fmt.Println("to delete:", <-created)
	// Output:
	// context deadline exceeded
	// to delete: /locks/k/n-0001
}

// RefreshBatch of 250 leases in runs of at most 100.
func ExampleChunks() {
	for lo, hi := range driverkit.Chunks(250, 100, nil) {
		fmt.Println(lo, hi)
	}
	// Output:
	// 0 100
	// 100 200
	// 200 250
}
