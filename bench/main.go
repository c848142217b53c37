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
//
// With -compare OLD,NEW it compares two bench binaries built against two
// revisions of locker instead (compare.sh builds them): it starts the
// servers once and runs the selected cells alternately in old and new for
// -compare-rounds rounds, each run a child process on the shared servers
// that writes its results as JSON (-json, -use-servers), and prints per
// cell the medians of old and new and their ratio:
//
//	bench/compare.sh main HEAD
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
	"runtime/pprof"
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
	churnKeys         int // new keys of the churn cell, split over its rounds
	perContender      bool
	cpuProfile        string
	manyTTL           time.Duration
	only              *regexp.Regexp
	cells             map[string]bool
	servers           map[string]bool
	// jsonOut is the file -json writes the results to, for -compare.
	jsonOut string
	// natsSync is JetStream's sync_interval on the nats-server the
	// bench starts ("": its default).
	natsSync string
	// useServers are running servers to use instead of starting them
	// (-use-servers), by name.
	useServers map[string]extServer
	cmp        compareConfig // see compare.go
	// set holds the flags given on the command line.
	set map[string]bool
}

const envRequireServers = "LOCKER_REQUIRE_SERVERS"

func main() {
	maybeServeEtcd()
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		os.Exit(2)
	}
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if cfg.cmp.bins != "" {
		if err := runCompare(cfg, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	rep, err := run(cfg, os.Stderr)
	if err == nil && cfg.jsonOut != "" {
		err = rep.writeJSON(cfg.jsonOut)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		pprof.StopCPUProfile()
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
	fs.BoolVar(&cfg.perContender, "per-contender", true, "also run the contended cells of the Redis systems with one client per goroutine (as N processes)")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the bench process (its clients) to this file")
	fs.IntVar(&cfg.churnKeys, "churn-keys", 1000, "new keys of the churn cell per system, split over its interleaved rounds")
	fs.IntVar(&cfg.periods, "periods", 3, "renewal periods the many locks are held")
	fs.DurationVar(&cfg.manyTTL, "many-ttl", 3*time.Second, "lease of the many locks (renewed every third)")
	only := fs.String("only", "", "run only systems whose \"server / name\" matches this regexp")
	cells := fs.String("cells", "u,p,c,churn,many", "cells to run: u (uncontended), p (parallel), c (contended), churn (new keys), many")
	servers := fs.String("servers", "redis,etcd,zk,nats,mem", "servers to run (redis, etcd, zk, nats, mem, mongo: FerretDB, built from servers/ferretdb)")
	natsSync := fs.String("nats-sync", "", "JetStream sync_interval of nats-server (\"\" is its default, 2 minutes; \"always\" syncs every write)")
	quick := fs.Bool("quick", false, "tiny durations, for a smoke test")
	fs.StringVar(&cfg.jsonOut, "json", "", "also write the results (one record per system, cell and metric) as JSON to this file")
	useServers := fs.String("use-servers", "", "use these running servers instead of starting them: name=host:port@pid,... (names redis, etcd, zk; the pid is read for the server CPU columns)")
	cmpFlags(fs, &cfg.cmp)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	cfg.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { cfg.set[f.Name] = true })
	if cfg.cmp.bins != "" {
		cmpDefaults(fs, cfg.set)
	}
	var err error
	cfg.natsSync = *natsSync
	if cfg.useServers, err = parseExtServers(*useServers); err != nil {
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
	ss = append(ss, natsSystems()...)
	ss = append(ss, memSystems()...)
	ss = append(ss, mongoSystems()...)
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
	e := newEnv(cfg)
	rep := newReport(cfg)
	defer e.stopServers()
	if err := e.startServers(rep); err != nil {
		return nil, err
	}
	defer e.stopOnInterrupt(log)()
	if e.zk != nil && e.zk.cmd != nil {
		// The JVM compiles ZooKeeper's hot paths only after a while.
		if err := warmZK(e, 10*cfg.warmup); err != nil {
			return nil, fmt.Errorf("warming up ZooKeeper: %w", err)
		}
	}
	rep.systems = e.selectedSystems()
	rep.sleep, rep.work = calibrate(cfg.cs)
	for _, srv := range []string{"redis", "etcd", "zk", "nats", "mem", "mongo"} {
		group := ofServer(rep.systems, srv)
		if len(group) == 0 {
			continue
		}
		if cfg.cells["u"] {
			runUncontendedCells(e, rep, log, srv, group)
		}
		if cfg.cells["p"] {
			runParallelCells(e, rep, log, group)
		}
		if cfg.cells["c"] {
			runContendedCells(e, rep, log, group)
		}
		if cfg.cells["churn"] {
			runChurnCells(e, rep, log, group)
		}
	}
	if cfg.cells["many"] {
		runManyCells(e, rep, log)
	}
	rep.elapsed = time.Since(started)
	rep.goVersion = runtime.Version()
	return rep, nil
}

// newEnv returns the environment of a run, without servers yet.
func newEnv(cfg config) *env {
	e := &env{cfg: cfg, trips: map[string]*counter{"redis": {}, "zk": {}, "etcd": {}, "mongo": {}}}
	e.rpcs = &rpcCounter{opCounter{trips: e.trips["etcd"]}}
	e.zkOps = &opCounter{trips: e.trips["zk"]}
	return e
}

// startServers starts the selected servers, noting in rep those that are
// not installed (an error with LOCKER_REQUIRE_SERVERS=1) and the versions
// of the others. The caller stops them with stopServers, on error too.
func (e *env) startServers(rep *report) error {
	if len(e.cfg.useServers) > 0 {
		return e.attachServers(rep)
	}
	starters := []struct {
		name  string
		start func() (*server, error)
		dst   **server
	}{
		{"redis", startRedis, &e.redis},
		{"etcd", startEtcd, &e.etcd},
		{"zk", startZK, &e.zk},
		{"nats", func() (*server, error) { return startNats(e.cfg.natsSync) }, &e.nats},
		{"mongo", startMongo, &e.mongo},
	}
	for _, st := range starters {
		if !e.cfg.servers[st.name] {
			continue
		}
		s, err := st.start()
		if err != nil {
			if errors.Is(err, errNotInstalled) && os.Getenv(envRequireServers) != "1" {
				rep.notef("%s skipped: %v", st.name, err)
				continue
			}
			return err
		}
		*st.dst = s
		rep.servers[st.name] = serverVersion(st.name, s)
	}
	return nil
}

// stopServers stops the servers that run.
func (e *env) stopServers() {
	e.redis.stop()
	e.zk.stop()
	e.etcd.stop()
	e.nats.stop()
	e.mongo.stop()
}

// stopOnInterrupt makes an interrupt (SIGINT, SIGTERM) stop the servers,
// removing their directories, before the process exits, until the
// returned function is called.
func (e *env) stopOnInterrupt(log io.Writer) (cancel func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sig:
			fmt.Fprintf(log, "bench: %v: stopping the servers\n", s)
			e.stopServers()
			os.Exit(130)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(sig)
		close(done)
	}
}

// available reports whether the systems of server can run: it is selected
// and, but for the in-memory one, started.
func (e *env) available(server string) bool {
	return e.cfg.servers[server] && (server == "mem" || e.srv(server) != nil)
}

// selected reports whether -only selects the system labelled label.
func (e *env) selected(label string) bool {
	return e.cfg.only == nil || e.cfg.only.MatchString(label)
}

// selectedSystems returns the systems to run, in table order.
func (e *env) selectedSystems() []*system {
	var systems []*system
	for _, s := range allSystems() {
		if e.available(s.server) && e.selected(s.label()) {
			systems = append(systems, s)
		}
	}
	return systems
}

// ofServer returns the systems of server.
func ofServer(systems []*system, server string) []*system {
	var group []*system
	for _, s := range systems {
		if s.server == server {
			group = append(group, s)
		}
	}
	return group
}

// inRound returns the systems in the order of round: every other round
// reverses it, so that no system always runs right after the same
// neighbour, and a burst of load on the machine does not fall on one
// system only.
func inRound[T any](systems []T, round int) []T {
	order := slices.Clone(systems)
	if round%2 == 1 {
		slices.Reverse(order)
	}
	return order
}

// runUncontendedCells measures the uncontended cell of the group of
// systems of server srv, in cfg.rounds interleaved rounds.
func runUncontendedCells(e *env, rep *report, log io.Writer, srv string, group []*system) {
	cfg := e.cfg
	fmt.Fprintf(log, "%s: uncontended, %d rounds\n", srv, cfg.rounds)
	var us []*uncontended
	for _, s := range group {
		if s.contendedOnly || s.parallelOnly {
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
		for _, u := range inRound(us, round) {
			u.measure(e, cfg.dur/time.Duration(cfg.rounds))
		}
	}
	for _, u := range us {
		u.inst.close()
		rep.unc[u.s] = &u.r
	}
}

// runParallelCells measures the parallel cell of a group, in cfg.crounds
// interleaved rounds whose results merge.
func runParallelCells(e *env, rep *report, log io.Writer, group []*system) {
	cfg := e.cfg
	for round := range cfg.crounds {
		for _, s := range inRound(group, round) {
			if s.contendedOnly {
				continue
			}
			fmt.Fprintf(log, "%s: parallel %d (round %d)", s.label(), cfg.parallel, round+1)
			r, err := runParallel(e, s, cfg.parallel, cfg.dur/time.Duration(cfg.crounds))
			if err != nil {
				fmt.Fprintln(log)
				rep.failf(s, "parallel", err)
				continue
			}
			fmt.Fprintf(log, ": %.0f pairs/s\n", float64(r.pairs)/r.d.elapsed.Seconds())
			if old := rep.par[s]; old != nil {
				old.merge(r)
			} else {
				rep.par[s] = r
			}
		}
	}
}

// runContendedCells measures the contended cells of a group, one for each
// number of goroutines and, for the perContender systems, once more with
// one client per goroutine, in cfg.crounds interleaved rounds whose
// results merge.
func runContendedCells(e *env, rep *report, log io.Writer, group []*system) {
	cfg := e.cfg
	type cell struct {
		s       *system
		clients int
	}
	for _, n := range cfg.ns {
		var cells, own []cell
		for _, s := range group {
			if s.parallelOnly {
				continue
			}
			cells = append(cells, cell{s, s.clients})
			if cfg.perContender && s.perContender && n != s.clients {
				own = append(own, cell{s, n})
			}
		}
		for _, shape := range [][]cell{cells, own} {
			for round := range cfg.crounds {
				for _, c := range inRound(shape, round) {
					s := c.s
					fmt.Fprintf(log, "%s: contended %d, %d clients (round %d)\n", s.label(), n, c.clients, round+1)
					r, err := runContended(e, s, n, c.clients, cfg.cs, cfg.cdur/time.Duration(cfg.crounds))
					if err != nil {
						rep.failf(s, fmt.Sprintf("contended %d, %d clients", n, c.clients), err)
						continue
					}
					if old := rep.contendedOn(s, n, c.clients); old != nil {
						old.merge(r)
					} else {
						rep.con[s] = append(rep.con[s], r)
					}
				}
			}
		}
	}
}

// runManyCells runs the many-locks cell of every selected system that has
// one.
func runManyCells(e *env, rep *report, log io.Writer) {
	cfg := e.cfg
	for _, s := range allManySystems() {
		if !e.available(s.server) || !e.selected(s.server+" / "+s.name) {
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
	case "nats":
		return natsVersion + s.note
	case "mongo":
		return "FerretDB v1.24.2 over SQLite (servers/ferretdb, own process)"
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
