// Command locker demonstrates locker's distributed locks.
//
//	go run ./cmd/locker demo              # in-process backend, nothing to install
//	go run ./cmd/locker demo -workers 6 -rounds 4 -ttl 600ms
//
// The demo starts several workers, each with a client of its own (as if
// each were a separate process), that contend for one lock. It prints who
// holds the lock, the fencing tokens, and each handoff; then it cuts one
// holder off from the backend and shows that the holder learns of the loss
// before anyone else gets the lock, and that the fenced resource rejects
// the cut-off holder's late write; last, a holder that shuts down closes
// its Client, and the next worker gets the lock at once instead of after
// the lease's TTL.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "demo" {
		fmt.Fprintln(stderr, "usage: locker demo [-workers N] [-rounds N] [-ttl D] [-work D]")
		return 2
	}
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg demoConfig
	fs.IntVar(&cfg.workers, "workers", 4, "workers contending for the lock, each with its own client")
	fs.IntVar(&cfg.rounds, "rounds", 3, "times each worker takes the lock")
	fs.DurationVar(&cfg.ttl, "ttl", 500*time.Millisecond, "lease TTL")
	fs.DurationVar(&cfg.work, "work", 20*time.Millisecond, "time spent in each critical section")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if cfg.workers < 2 || cfg.rounds < 1 || cfg.ttl <= 0 || cfg.work < 0 {
		fmt.Fprintln(stderr, "locker demo: need -workers >= 2, -rounds >= 1, -ttl > 0, -work >= 0")
		return 2
	}
	if err := demo(stdout, cfg); err != nil {
		fmt.Fprintln(stderr, "locker demo:", err)
		return 1
	}
	return 0
}
