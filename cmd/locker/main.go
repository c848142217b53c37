// Command locker runs shell commands under a distributed lock, inspects
// and releases locks, and demonstrates locker's locks.
//
//	locker run [-url URL] [-connect-timeout d] [-n] [-w timeout] [-ttl d] [-shared] [-grace d] [-v] KEY [--] command [args...]
//	locker status [-url URL] [-connect-timeout d] [-json] [-v] KEY
//	locker release [-url URL] [-connect-timeout d] [-v] --force KEY
//	locker demo [-workers N] [-rounds N] [-ttl D] [-work D]
//
// Install it with
//
//	go install github.com/go-locker/locker/cmd/locker@latest
//
// Flags come before KEY: run refuses a flag after KEY (exit 64) rather
// than take it for the command. Everything after "--" is the command.
//
// # Backends
//
// run, status and release reach the backend named by -url or, without
// it, by the LOCKER_URL environment variable:
//
//	redis://[user:password@]host:port[/db]            Redis (rediss:// for TLS)
//	redis+sentinel://[user:password@]host:port[,host:port...]/master[?db=N]
//	                                                  Redis through Sentinel
//	etcd://[user:password@]host:port[,host:port...]   etcd (etcds:// for https)
//	zk://host:port[,host:port...][/root][?session=20s] ZooKeeper (root default /locker)
//	postgres://user[:password]@host:port/db[?...]     PostgreSQL (pgx connection string)
//	mysql://user[:password]@host:port/db              MySQL or MariaDB
//	memcached://host:port[,host:port...]              memcached (run it with -M)
//	mongodb://[user:password@]host:port[,host:port...][/db][?...]
//	                                                  MongoDB or FerretDB (database default locker)
//
// Every URL takes ?locker_prefix=P: the key prefix (Redis, etcd,
// memcached), the root node (ZooKeeper), the lease table (SQL, created
// if missing) or the lock collection (MongoDB, default locker_locks).
// Other query parameters are the client library's (go-redis, pgx, the
// MongoDB driver).
//
// # Failing fast
//
// Every subcommand first reaches the backend and reads KEY's state there
// (the driver's Inspect), and gives up after -connect-timeout (default
// 10s): a backend that refuses connections, does not answer, refuses the
// password or fails ends locker with status 69 and one line on stderr
// that names the backend, whether or not -w or -n was given. While run
// waits for KEY, it reads KEY's state every half -connect-timeout; once
// no read has succeeded for -connect-timeout, the wait ends with status
// 69. When -w runs out, a last read tells a busy key (75) from a backend
// gone away (69): a script never takes a dead backend for a busy key.
//
// # Output and secrets
//
// No password from a URL appears in locker's output: URLs are printed
// without their password (nor the values of query parameters whose name
// holds "pass", "secret" or "token"), -url has no default to print in
// usage messages, and everything locker and the client libraries write
// goes through a filter that replaces those secrets with "xxxxx". The
// command that run starts writes to locker's stdout and stderr directly,
// and finds LOCKER_URL in its environment if locker did.
//
// The client libraries' own logs (go-redis, go-sql-driver/mysql, gRPC
// and etcd's client, go-zookeeper) are silent unless -v, which also logs
// the hold's progress and each failed attempt or renewal.
//
// # locker run
//
// run takes KEY (waiting for it unless -n; at most -w if given), then runs
// the command with LOCKER_KEY and LOCKER_TOKEN (the hold's fencing token)
// added to its environment, and releases KEY when the command ends. The
// lease is renewed while the command runs. Signals sent to locker (INT,
// TERM, HUP, QUIT, USR1, USR2) are passed on to the command; while
// locker waits for KEY, such a signal ends the wait (status 128+N). If
// the hold is lost (the backend was unreachable for longer than the TTL
// allows, or an operator released the key by force), the command gets
// SIGTERM, then SIGKILL after -grace, and locker exits with status 76.
//
// Flags of run:
//
//	-url URL              backend (default: $LOCKER_URL)
//	-connect-timeout d    exit 69 if the backend does not answer within d (10s)
//	-n                    do not wait: exit 75 at once if KEY is held
//	-w d                  wait at most d for KEY, then exit 75 (0: for ever)
//	-ttl d                lease TTL: how long KEY outlives a crashed locker (15s)
//	-shared               take a shared (read) hold: shared holders run together
//	-grace d              after a loss, time between SIGTERM and SIGKILL (10s)
//	-v                    log progress and the client libraries' logs to stderr
//
// Exit statuses, like flock(1)'s, tell locker's own outcomes from the
// command's:
//
//	the command's own    the command ran and ended while the lock was held
//	                     (128+N if a signal N ended it)
//	64                   usage: bad flags, arguments, KEY or backend URL
//	69                   the backend could not be reached within
//	                     -connect-timeout, refused locker, or failed
//	75                   not acquired: -n found KEY held, or -w ran out
//	                     while the backend answered
//	76                   the hold was lost while the command ran; the
//	                     command was stopped
//	127                  the command could not be started
//	128+N                signal N ended the wait for KEY
//
// # locker status and locker release
//
// status prints the holders of KEY (owner, fencing token, remaining TTL),
// the highest token granted for KEY ("unknown" when the backend does not
// keep it for a free key: Redis keeps it only while the clock has not
// passed it, SQL not once the key is released) and the number of waiters,
// and exits 0 when KEY is held, 1 when it is free. With -json it prints
//
//	{"key": …, "held": …, "mode": "exclusive"|"shared", "holders": [{"owner": …, "token": …, "remaining_ms": …}], "fence": …, "waiting": …}
//
// where fence is the highest token granted, 0 when unknown.
//
// release --force ends every hold of KEY, whoever owns it, as an
// administrator would, and prints how many it ended: the holders learn of
// the loss at their next renewal (a `locker run` then stops its command
// and exits 76). Both take -url, -connect-timeout and -v, and exit 64 on
// usage errors and 69 when the backend cannot be used, as run does. Both
// need a driver whose Capabilities report Inspect, which every backend the
// command opens does.
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
  locker run [-url URL] [-connect-timeout d] [-n] [-w timeout] [-ttl d] [-shared] [-grace d] [-v] KEY [--] command [args...]
  locker status [-url URL] [-connect-timeout d] [-json] [-v] KEY
  locker release [-url URL] [-connect-timeout d] [-v] --force KEY
  locker demo [-workers N] [-rounds N] [-ttl D] [-work D]

Flags go before KEY. run holds KEY while the command runs; the command
finds LOCKER_KEY and LOCKER_TOKEN (the fencing token) in its environment.
Signals are passed on to it. If the hold is lost, the command gets
SIGTERM, then SIGKILL after -grace. "locker run -h" lists its flags.

A backend that does not answer within -connect-timeout (default 10s),
at the start or while run waits, ends locker with status 69; so does one
that refuses it or fails. -v shows the client libraries' own logs.

Exit statuses of run: the command's own (128+N for signal N); 64 usage;
69 backend unreachable or failed; 75 not acquired (-n found KEY held, or
-w ran out while the backend answered); 76 hold lost while the command
ran; 127 command not started. status exits 0 when KEY is held, 1 when it
is free.

`

// run is locker with args, writing to stdout and stderr, and returns its
// exit status. Everything it and the client libraries write goes through
// a redactor of the secrets of the backend URLs that args and
// $LOCKER_URL name.
func run(args []string, stdout, stderr io.Writer) int {
	urls := urlArgs(args, os.Getenv("LOCKER_URL"))
	stdout, stderr = newRedactor(stdout, urls), newRedactor(stderr, urls)
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
