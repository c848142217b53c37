// Command bench measures locker side by side with its peer libraries, in one
// run, on the same servers, and prints markdown tables.
//
// It starts redis-server, ZooKeeper (Debian's package) and an embedded etcd
// (in a child process) on loopback ports in temporary directories, runs
// every cell, stops the servers and prints the tables and the targets of
// issue 6 with the ratio each reached. A server that is not installed is
// skipped with a note, or is an error with LOCKER_REQUIRE_SERVERS=1.
//
// bench is a module of its own, so that the peer libraries never enter
// locker's go.mod; run it from its directory:
//
//	cd bench && go run .
//
// Flags shorten or select cells; -h lists them.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// config is what the flags select.
type config struct {
	dur, cdur, warmup time.Duration
	rounds, crounds   int
	cs                time.Duration
	parallel          int
	ns                []int
	many, manyOther   int
	periods           int
	manyTTL           time.Duration
	only              *regexp.Regexp
	cells             map[string]bool
	servers           map[string]bool
}

const envRequireServers = "LOCKER_REQUIRE_SERVERS"

func main() {
	maybeServeEtcd()
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		os.Exit(2)
	}
	rep, err := run(cfg, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	rep.write(os.Stdout)
}

func parseFlags(args []string, out io.Writer) (config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(out)
	var cfg config
	fs.DurationVar(&cfg.dur, "d", 2*time.Second, "duration of each uncontended and parallel cell")
	fs.DurationVar(&cfg.cdur, "cd", 3*time.Second, "duration of each contended cell")
	fs.DurationVar(&cfg.warmup, "warmup", 300*time.Millisecond, "warm-up before the uncontended cells")
	fs.IntVar(&cfg.rounds, "rounds", 4, "the uncontended cell of a server's systems runs in this many interleaved rounds")
	fs.IntVar(&cfg.crounds, "crounds", 2, "the parallel and contended cells of a server's systems run in this many interleaved rounds")
	fs.DurationVar(&cfg.cs, "cs", 100*time.Microsecond, "critical section of the contended cells")
	fs.IntVar(&cfg.parallel, "parallel", 16, "goroutines of the parallel cell (distinct keys)")
	ns := fs.String("n", "8,32", "goroutines of the contended cells (one key)")
	fs.IntVar(&cfg.many, "many", 10000, "locks held in the many-locks cell on Redis")
	fs.IntVar(&cfg.manyOther, "many-other", 2000, "locks held in the many-locks cell on etcd and ZooKeeper (each lock is a raft write or a znode: 10,000 take tens of seconds)")
	fs.IntVar(&cfg.periods, "periods", 3, "renewal periods the many locks are held")
	fs.DurationVar(&cfg.manyTTL, "many-ttl", 3*time.Second, "lease of the many locks (renewed every third)")
	only := fs.String("only", "", "run only systems whose \"server / name\" matches this regexp")
	cells := fs.String("cells", "u,p,c,many", "cells to run: u (uncontended), p (parallel), c (contended), many")
	servers := fs.String("servers", "redis,etcd,zk,mem", "servers to run")
	quick := fs.Bool("quick", false, "tiny durations, for a smoke test")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if *quick {
		cfg.dur, cfg.cdur, cfg.warmup, cfg.rounds, cfg.crounds = 200*time.Millisecond, 300*time.Millisecond, 20*time.Millisecond, 1, 1
		cfg.many, cfg.manyOther, cfg.periods, cfg.manyTTL = 300, 100, 1, 600*time.Millisecond
	}
	for f := range strings.SplitSeq(*ns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("bad -n %q", *ns)
		}
		cfg.ns = append(cfg.ns, n)
	}
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			return cfg, err
		}
		cfg.only = re
	}
	cfg.cells, cfg.servers = set(*cells), set(*servers)
	cfg.rounds, cfg.crounds = max(cfg.rounds, 1), max(cfg.crounds, 1)
	return cfg, nil
}

func set(s string) map[string]bool {
	m := map[string]bool{}
	for f := range strings.SplitSeq(s, ",") {
		m[strings.TrimSpace(f)] = true
	}
	return m
}

// allSystems lists the systems of every server, in table order.
func allSystems() []*system {
	var ss []*system
	ss = append(ss, redisSystems()...)
	ss = append(ss, quorumSystems()...)
	ss = append(ss, etcdSystems()...)
	ss = append(ss, zkSystems()...)
	ss = append(ss, memSystems()...)
	return ss
}

func allManySystems() []*manySystem {
	var ss []*manySystem
	ss = append(ss, redisManySystems()...)
	ss = append(ss, etcdManySystems()...)
	ss = append(ss, zkManySystems()...)
	return ss
}

// run starts the servers, runs the selected cells and returns the report.
func run(cfg config, log io.Writer) (*report, error) {
	started := time.Now()
	e := &env{cfg: cfg, trips: map[string]*counter{"redis": {}, "zk": {}, "etcd": {}}}
	e.rpcs = &rpcCounter{opCounter{trips: e.trips["etcd"]}}
	e.zkOps = &opCounter{trips: e.trips["zk"]}
	rep := newReport(cfg)
	stopAll := func() {
		e.redis.stop()
		e.zk.stop()
		e.etcd.stop()
	}
	defer stopAll()
	starters := []struct {
		name  string
		start func() (*server, error)
		dst   **server
	}{
		{"redis", startRedis, &e.redis},
		{"etcd", startEtcd, &e.etcd},
		{"zk", startZK, &e.zk},
	}
	for _, st := range starters {
		if !cfg.servers[st.name] {
			continue
		}
		s, err := st.start()
		if err != nil {
			if errors.Is(err, errNotInstalled) && os.Getenv(envRequireServers) != "1" {
				rep.notef("%s skipped: %v", st.name, err)
				continue
			}
			return nil, err
		}
		*st.dst = s
		rep.servers[st.name] = serverVersion(st.name, s)
	}
	// Interrupted from here on: stop the servers and remove their directories first.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case s := <-sig:
			fmt.Fprintf(log, "bench: %v: stopping the servers\n", s)
			stopAll()
			os.Exit(130)
		case <-done:
		}
	}()
	if e.zk != nil {
		// The JVM compiles ZooKeeper's hot paths only after a while.
		if err := warmZK(e, 10*cfg.warmup); err != nil {
			return nil, fmt.Errorf("warming up ZooKeeper: %w", err)
		}
	}
	available := func(server string) bool {
		return cfg.servers[server] && (server == "mem" || e.srv(server) != nil)
	}
	selected := func(label string) bool { return cfg.only == nil || cfg.only.MatchString(label) }

	var systems []*system
	for _, s := range allSystems() {
		if available(s.server) && selected(s.label()) {
			systems = append(systems, s)
		}
	}
	rep.systems = systems
	rep.sleep, rep.work = calibrate(cfg.cs)
	servers := []string{"redis", "etcd", "zk", "mem"}
	for _, srv := range servers {
		var group []*system
		for _, s := range systems {
			if s.server == srv {
				group = append(group, s)
			}
		}
		if len(group) == 0 {
			continue
		}
		if cfg.cells["u"] {
			fmt.Fprintf(log, "%s: uncontended, %d rounds\n", srv, cfg.rounds)
			var us []*uncontended
			for _, s := range group {
				if s.contendedOnly {
					continue
				}
				u, err := prepareUncontended(e, s)
				if err != nil {
					rep.failf(s, "uncontended", err)
					continue
				}
				us = append(us, u)
			}
			for round := range cfg.rounds {
				// Alternate the order so that no system always runs
				// right after the same neighbour.
				order := slices.Clone(us)
				if round%2 == 1 {
					slices.Reverse(order)
				}
				for _, u := range order {
					u.measure(e, cfg.dur/time.Duration(cfg.rounds))
				}
			}
			for _, u := range us {
				u.inst.close()
				rep.unc[u.s] = &u.r
			}
		}
		// The parallel and contended cells run in rounds too, the order
		// reversed every round, so that a burst of load on the machine
		// does not fall on one system only.
		for round := range cfg.crounds {
			order := slices.Clone(group)
			if round%2 == 1 {
				slices.Reverse(order)
			}
			if !cfg.cells["p"] {
				break
			}
			for _, s := range order {
				if s.contendedOnly {
					continue
				}
				fmt.Fprintf(log, "%s: parallel %d (round %d)\n", s.label(), cfg.parallel, round+1)
				r, err := runParallel(e, s, cfg.parallel, cfg.dur/time.Duration(cfg.crounds))
				if err != nil {
					rep.failf(s, "parallel", err)
					continue
				}
				if old := rep.par[s]; old != nil {
					old.merge(r)
				} else {
					rep.par[s] = r
				}
			}
		}
		if cfg.cells["c"] {
			for _, n := range cfg.ns {
				for round := range cfg.crounds {
					order := slices.Clone(group)
					if round%2 == 1 {
						slices.Reverse(order)
					}
					for _, s := range order {
						fmt.Fprintf(log, "%s: contended %d (round %d)\n", s.label(), n, round+1)
						r, err := runContended(e, s, n, cfg.cs, cfg.cdur/time.Duration(cfg.crounds))
						if err != nil {
							rep.failf(s, fmt.Sprintf("contended %d", n), err)
							continue
						}
						if old := rep.contended(s, n); old != nil {
							old.merge(r)
						} else {
							rep.con[s] = append(rep.con[s], r)
						}
					}
				}
			}
		}
	}
	if cfg.cells["many"] {
		for _, s := range allManySystems() {
			if !available(s.server) || !selected(s.server+" / "+s.name) {
				continue
			}
			n := cfg.many
			if s.server != "redis" {
				n = cfg.manyOther
			}
			fmt.Fprintf(log, "%s / %s: many locks (%d)\n", s.server, s.name, n)
			rep.many = append(rep.many, runMany(e, s, n, cfg.periods, cfg.manyTTL))
		}
	}
	rep.elapsed = time.Since(started)
	rep.goVersion = runtime.Version()
	return rep, nil
}

// serverVersion describes a running server.
func serverVersion(name string, s *server) string {
	switch name {
	case "redis":
		if info, err := redisDo(s.addr, "INFO", "server"); err == nil {
			for line := range strings.SplitSeq(info, "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
					return "redis-server " + v + " (no persistence)"
				}
			}
		}
		return "redis-server"
	case "zk":
		return "ZooKeeper " + zkVersion() + " (Debian package, standalone, forceSync=yes)"
	case "etcd":
		return "etcd " + etcdVersion + " (embed, own process, fsync on)"
	}
	return name
}

// calibrate measures what time.Sleep(cs) and work(cs) take here.
func calibrate(cs time.Duration) (sleep, wrk time.Duration) {
	var hs, hw hist
	for range 100 {
		t := time.Now()
		time.Sleep(cs)
		hs.add(time.Since(t))
		t = time.Now()
		work(cs)
		hw.add(time.Since(t))
	}
	return hs.quantile(0.5), hw.quantile(0.5)
}
