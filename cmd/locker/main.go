// Command locker runs shell commands under a distributed lock, inspects
// and releases locks, and demonstrates locker's locks.
//
//	locker run [-n] [-w timeout] [-ttl d] [-shared] [-grace d] KEY -- command [args...]
//	locker status [-json] KEY
//	locker release --force KEY
//	locker demo [-workers N] [-rounds N] [-ttl D] [-work D]
//
// run, status and release reach the backend named by -url or by the
// LOCKER_URL environment variable: redis://, rediss://, redis+sentinel://,
// etcd://, zk://, postgres:// or mysql:// (locker -h lists the forms).
//
// # locker run
//
// run takes KEY (waiting for it unless -n; at most -w if given), then runs
// the command with LOCKER_KEY and LOCKER_TOKEN (the hold's fencing token)
// added to its environment, and releases KEY when the command ends. The
// lease is renewed while the command runs. Signals sent to locker (INT,
// TERM, HUP, QUIT, USR1, USR2) are passed on to the command. If the hold is
// lost (the backend was unreachable for longer than the TTL allows, or an
// operator released the key by force), the command gets SIGTERM, then
// SIGKILL after -grace, and locker exits with status 76.
//
// Exit statuses, like flock(1)'s, tell locker's own outcomes from the
// command's:
//
//	the command's own    the command ran and ended while the lock was held
//	                     (128+N if a signal N ended it)
//	64                   usage: bad flags, arguments or backend URL
//	69                   the backend could not be reached, or failed
//	75                   not acquired: -n found KEY held, or -w ran out
//	76                   the hold was lost while the command ran; the command was stopped
//	127                  the command could not be started
//
// # locker status and locker release
//
// status prints the holders of KEY (owner, fencing token, remaining TTL),
// the highest token granted (fence) and the number of waiters, and exits
// 0 when KEY is held, 1 when it is free. release --force ends every hold
// of KEY, whoever owns it, as an administrator would: the holders learn of
// the loss at their next renewal (a `locker run` then stops its command
// and exits 76). Both need a driver whose Capabilities report Inspect
// (driver.Inspector), which every backend the command opens does.
//
// # locker demo
//
// The demo starts several workers, each with a client of its own (as if
// each were a separate process), that contend for one lock. It prints who
// holds the lock, the fencing tokens, and each handoff; then it cuts one
// holder off from the backend and shows that the holder learns of the loss
// before anyone else gets the lock, and that the fenced resource rejects
// the cut-off holder's late write; last, a holder that shuts down closes
// its Client, and the next worker gets the lock at once instead of after
// the lease's TTL. It needs no backend:
//
//	go run ./cmd/locker demo
//	go run ./cmd/locker demo -workers 6 -rounds 4 -ttl 600ms
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const help = `locker runs commands under a distributed lock, and inspects locks.

usage:
  locker run [-url URL] [-n] [-w timeout] [-ttl d] [-shared] [-grace d] KEY -- command [args...]
  locker status [-url URL] [-json] KEY
  locker release [-url URL] --force KEY
  locker demo [-workers N] [-rounds N] [-ttl D] [-work D]

run holds KEY while the command runs; the command finds LOCKER_KEY and
LOCKER_TOKEN (the fencing token) in its environment. Signals are passed on
to it. If the hold is lost, the command gets SIGTERM, then SIGKILL after
-grace. "locker run -h" lists its flags.

Exit statuses of run: the command's own (128+N for signal N); 64 usage;
69 backend unreachable or failed; 75 not acquired (-n found KEY held, or
-w ran out); 76 hold lost while the command ran; 127 command not started.
status exits 0 when KEY is held, 1 when it is free.

`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, help+urlHelp+"\n")
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, help+urlHelp+"\n")
		return 0
	case "run":
		return runCmd(args[1:], stderr)
	case "status":
		return statusCmd(args[1:], stdout, stderr)
	case "release":
		return releaseCmd(args[1:], stdout, stderr)
	case "demo":
		return demoCmd(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "locker: unknown command %q\n\n%s%s\n", args[0], help, urlHelp)
	return exitUsage
}

func demoCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg demoConfig
	fs.IntVar(&cfg.workers, "workers", 4, "workers contending for the lock, each with its own client")
	fs.IntVar(&cfg.rounds, "rounds", 3, "times each worker takes the lock")
	fs.DurationVar(&cfg.ttl, "ttl", 500*time.Millisecond, "lease TTL")
	fs.DurationVar(&cfg.work, "work", 20*time.Millisecond, "time spent in each critical section")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	if cfg.workers < 2 || cfg.rounds < 1 || cfg.ttl <= 0 || cfg.work < 0 {
		fmt.Fprintln(stderr, "locker demo: need -workers >= 2, -rounds >= 1, -ttl > 0, -work >= 0")
		return exitUsage
	}
	if err := demo(stdout, cfg); err != nil {
		fmt.Fprintln(stderr, "locker demo:", err)
		return 1
	}
	return 0
}
