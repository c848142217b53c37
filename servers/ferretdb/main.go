// Command ferretdb is the MongoDB-compatible server the tests of
// driver/mongodriver, cmd/locker and bench run as a process of their own
// (built by internal/proc.GoBinary): FerretDB embedded over SQLite, kept
// out of every published go.mod. FerretDB's own command panics at start
// when built with go install (it reads its version from a file of its
// source tree), so this main embeds its package instead.
//
//	ferretdb -listen 127.0.0.1:27017 -dir /var/lib/ferretdb
//
// The data directory keeps one SQLite file per database: a server
// restarted on the same directory finds every document it had.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/FerretDB/FerretDB/ferretdb"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:27017", "TCP `address` to serve the MongoDB wire protocol on")
	dir := flag.String("dir", "", "data `directory` (required; created if missing)")
	flag.Parse()
	if *dir == "" {
		log.Fatal("ferretdb: -dir is required")
	}
	if err := run(*listen, *dir); err != nil {
		log.Fatal(err)
	}
}

func run(listen, dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return err
	}
	// _txlock=immediate: FerretDB's writes run in transactions, which
	// SQLite begins DEFERRED by default: one that has read before it
	// writes must take the write lock from inside a read transaction,
	// and SQLite then answers SQLITE_BUSY, or SQLITE_BUSY_SNAPSHOT (517)
	// when another write committed meanwhile, at once, without the busy
	// timeout (FerretDB sets 10s) that would have waited. A burst of
	// writes, as when the server continues after a SIGSTOP, returned
	// "database is locked" to inserts, which MongoDB never does. BEGIN
	// IMMEDIATE takes the write lock first, through the busy timeout.
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: listen},
		Handler:   "sqlite",
		SQLiteURL: "file:" + abs + "/?_txlock=immediate",
	})
	if err != nil {
		return fmt.Errorf("ferretdb: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "ferretdb: serving %s on %s\n", abs, listen)
	return f.Run(ctx)
}
