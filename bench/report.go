package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// report holds the results of a run and prints them as markdown.
type report struct {
	cfg       config
	servers   map[string]string // server -> version description
	systems   []*system
	unc       map[*system]*uncontendedResult
	par       map[*system]*parallelResult
	con       map[*system][]*contendedResult
	many      []*manyResult
	churn     map[*system]*churnResult // see churn.go
	notes     []string
	elapsed   time.Duration
	goVersion string
	args      []string
	// sleep and work are the median durations of time.Sleep(cs) and of
	// the critical section used, work(cs), measured at the start.
	sleep, work time.Duration
}

func newReport(cfg config) *report {
	return &report{
		cfg:     cfg,
		servers: map[string]string{},
		unc:     map[*system]*uncontendedResult{},
		par:     map[*system]*parallelResult{},
		con:     map[*system][]*contendedResult{},
		args:    os.Args[1:],
	}
}

func (r *report) notef(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

func (r *report) failf(s *system, cell string, err error) {
	r.notef("%s, %s cell failed: %v", s.label(), cell, err)
}

// find returns the system with this server and name.
func (r *report) find(server, name string) *system {
	for _, s := range r.systems {
		if s.server == server && s.name == name {
			return s
		}
	}
	return nil
}

// contended returns the contended cell of s with n goroutines on its
// usual clients (s.clients).
func (r *report) contended(s *system, n int) *contendedResult {
	if s == nil {
		return nil
	}
	return r.contendedOn(s, n, s.clients)
}

// contendedOn returns the contended cell of s with n goroutines spread
// over clients clients.
func (r *report) contendedOn(s *system, n, clients int) *contendedResult {
	if s == nil {
		return nil
	}
	for _, c := range r.con[s] {
		if c.n == n && c.clients == clients {
			return c
		}
	}
	return nil
}

// Formatting.

func us(d time.Duration) string {
	v := float64(d) / float64(time.Microsecond)
	if v < 1000 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v < 1:
		return fmt.Sprintf("%.2f", v)
	case v < 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func ratio(x float64) string {
	if math.IsInf(x, 1) {
		return "∞"
	}
	return fmt.Sprintf("%.2f", x)
}

func per(n int64, d int) string {
	if d == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", float64(n)/float64(d))
}

func perF(n int64, d, prec int) string {
	if d == 0 {
		return "–"
	}
	return fmt.Sprintf("%.*f", prec, float64(n)/float64(d))
}

func perDur(t time.Duration, d int) string {
	if d == 0 {
		return "–"
	}
	return us(t / time.Duration(d))
}

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// table writes a markdown table; align has one 'l' or 'r' per column.
func table(w io.Writer, align string, head []string, rows [][]string) {
	fmt.Fprintf(w, "| %s |\n|", strings.Join(head, " | "))
	for _, a := range align {
		if a == 'r' {
			fmt.Fprint(w, "--:|")
		} else {
			fmt.Fprint(w, "---|")
		}
	}
	fmt.Fprintln(w)
	for _, row := range rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
	fmt.Fprintln(w)
}

func bold(s string, b bool) string {
	if b {
		return "**" + s + "**"
	}
	return s
}

// machine describes the machine the run is on.
func machine() string {
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf(", %.0f GiB", float64(kb)/(1<<20))
		}
	}
	kernel := ""
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = ", Linux " + strings.TrimSpace(string(b))
	}
	load := ""
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			load = fmt.Sprintf("; load average at the end %s %s %s", f[0], f[1], f[2])
		}
	}
	return fmt.Sprintf("%d CPU (%s)%s%s, %s/%s%s", runtime.NumCPU(), model, mem, kernel, runtime.GOOS, runtime.GOARCH, load)
}

func (r *report) write(w io.Writer) {
	fmt.Fprintf(w, "Machine: %s. %s.\n\n", machine(), r.goVersion)
	var srv []string
	for _, k := range []string{"redis", "etcd", "zk", "mongo"} {
		if v := r.servers[k]; v != "" {
			srv = append(srv, v)
		}
	}
	fmt.Fprintf(w, "Servers, started by the tool on loopback: %s.\n\n", strings.Join(srv, "; "))
	cmd := "cd bench && go run ."
	if len(r.args) > 0 {
		cmd += " " + strings.Join(r.args, " ")
	}
	fmt.Fprintf(w, "Command: `%s`; run time %s (servers' start and stop included).\n\n", cmd, r.elapsed.Round(time.Second))
	for _, n := range r.notes {
		fmt.Fprintf(w, "* %s\n", n)
	}
	if len(r.notes) > 0 {
		fmt.Fprintln(w)
	}
	r.writeTargets(w)
	r.writeUncontended(w)
	r.writeCommands(w)
	r.writeParallel(w)
	r.writeContended(w)
	r.writePerContender(w)
	r.writeChurn(w)
	r.writeMany(w)
	r.writeFlags(w)
	r.writeSystems(w)
}

func (r *report) writeUncontended(w io.Writer) {
	if len(r.unc) == 0 {
		return
	}
	fmt.Fprintf(w, "### Uncontended: one goroutine locks and unlocks one key\n\n")
	fmt.Fprintf(w, "%d interleaved rounds per server, %v in all per system. Latency is of the whole lock+unlock pair. Round trips = client writes per pair on the counted connections for Redis and ZooKeeper (each command, pipeline or request is one write), gRPC requests for etcd (unary calls and stream messages). Allocations and client CPU are the bench process's (`runtime.ReadMemStats`, `getrusage`), which holds only clients; server CPU is the server process's (`/proc/<pid>/stat`, 10 ms ticks).\n\n", r.cfg.rounds, r.cfg.dur)
	var rows [][]string
	for _, s := range r.systems {
		u := r.unc[s]
		if u == nil {
			continue
		}
		cmds := "–"
		if s.server == "redis" {
			cmds = per(u.d.cmds.total(), u.pairs)
		}
		rows = append(rows, []string{
			s.server, bold(s.name, s.kind == kindLocker),
			fmt.Sprintf("%.0f", rate(u.pairs, u.d.elapsed)),
			us(u.lat.quantile(0.5)), us(u.lat.quantile(0.99)),
			per(u.d.trips, u.pairs), cmds,
			perF(int64(u.d.mallocs), u.pairs, 1), perF(int64(u.d.bytes), u.pairs, 0),
			perDur(u.d.cpu, u.pairs), perDur(u.d.srvCPU, u.pairs),
			fmt.Sprint(u.errors),
		})
	}
	table(w, "llrrrrrrrrrr", []string{"server", "system", "pairs/s", "p50 µs", "p99 µs", "round trips/pair", "server cmds/pair", "allocs/pair", "bytes/pair", "client CPU µs/pair", "server CPU µs/pair", "errors"}, rows)
}

// mix formats a command mix as calls per unit, most frequent first.
func mix(cmds cmdStats, n int) string {
	names := make([]string, 0, len(cmds))
	for k := range cmds {
		if !isUsec(k) && k != zkWrites {
			names = append(names, k)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := int(cmds[b] - cmds[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, k := range names {
		if v := float64(cmds[k]) / float64(n); v >= 0.005 {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, v))
		}
	}
	if w := cmds[zkWrites]; w > 0 {
		// ZooKeeper: the Writes (system calls) that carried them.
		return strings.Join(parts, ", ") + fmt.Sprintf("; in %.2f writes", float64(w)/float64(n))
	}
	return strings.Join(parts, ", ")
}

func evalshaUsec(c cmdStats) string {
	if v := c.perCall("EVALSHA"); v > 0 {
		return fmt.Sprintf("%.1f", v)
	}
	return "–"
}

func (r *report) writeCommands(w io.Writer) {
	r.writeMix(w, "redis", "### Redis server commands\n\n`INFO commandstats` deltas per pair in the uncontended and parallel cells, per acquisition in the contended cells; commands that scripts run (`redis.call`) count too, so the mix shows what each script does. EVALSHA µs/call is the server's own time per script call (`usec_per_call`, the commands the script runs included).\n\n", true)
	r.writeMix(w, "zk", "### ZooKeeper requests\n\nRequests the clients sent, by opcode (read from each request's header). Per pair in the uncontended and parallel cells, per acquisition in the contended cells.\n\n", false)
	r.writeMix(w, "etcd", "### etcd requests\n\ngRPC requests the clients sent, counted by interceptors: a unary call is one, a message sent on a stream (Watch, LeaseKeepAlive) is one. Per pair in the uncontended and parallel cells, per acquisition in the contended cells.\n\n", false)
}

func (r *report) writeMix(w io.Writer, server, intro string, evalsha bool) {
	var rows [][]string
	row := func(s *system, cell string, cmds cmdStats, n int) {
		cells := []string{bold(s.name, s.kind == kindLocker), cell, per(cmds.total(), n)}
		if evalsha {
			cells = append(cells, evalshaUsec(cmds))
		}
		rows = append(rows, append(cells, mix(cmds, n)))
	}
	for _, s := range r.systems {
		if u := r.unc[s]; u != nil && s.server == server && u.pairs > 0 {
			row(s, "uncontended", u.d.cmds, u.pairs)
		}
	}
	for _, s := range r.systems {
		if p := r.par[s]; p != nil && s.server == server && p.pairs > 0 {
			row(s, fmt.Sprintf("parallel %d, per pair", p.goroutines), p.d.cmds, p.pairs)
		}
	}
	for _, s := range r.systems {
		for _, c := range r.con[s] {
			if s.server == server && c.acquisitions > 0 {
				row(s, fmt.Sprintf("N=%d, %d clients, per acquisition", c.n, c.clients), c.d.cmds, c.acquisitions)
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprint(w, intro)
	if evalsha {
		table(w, "llrrl", []string{"system", "cell", "cmds", "EVALSHA µs/call", "mix (calls per pair or acquisition)"}, rows)
	} else {
		table(w, "llrl", []string{"system", "cell", "requests", "mix (requests per pair or acquisition)"}, rows)
	}
}

func (r *report) writeParallel(w io.Writer) {
	if len(r.par) == 0 {
		return
	}
	fmt.Fprintf(w, "### Parallel: %d goroutines, each its own key\n\nGoroutine i uses client i%%clients (clients column). Latency is per pair. %v per system, in %d interleaved rounds per server.\n\n", r.cfg.parallel, r.cfg.dur, r.cfg.crounds)
	var rows [][]string
	for _, s := range r.systems {
		p := r.par[s]
		if p == nil {
			continue
		}
		rows = append(rows, []string{s.server, bold(s.name, s.kind == kindLocker), fmt.Sprint(s.clients),
			fmt.Sprintf("%.0f", rate(p.pairs, p.d.elapsed)), us(p.lat.quantile(0.5)), us(p.lat.quantile(0.99)),
			per(p.d.trips, p.pairs), perF(int64(p.d.mallocs), p.pairs, 1), perDur(p.d.cpu, p.pairs), fmt.Sprint(p.errors)})
	}
	table(w, "llrrrrrrrr", []string{"server", "system", "clients", "pairs/s", "p50 µs", "p99 µs", "round trips/pair", "allocs/pair", "client CPU µs/pair", "errors"}, rows)
}

func (r *report) writeContended(w io.Writer) {
	if len(r.con) == 0 {
		return
	}
	fmt.Fprintf(w, "### Contended: N goroutines on one key, critical section %v, each locks again right after it unlocks\n\n", r.cfg.cs)
	fmt.Fprintf(w, "Each goroutine has its own handle; goroutine i uses client i%%clients (a client is a connection, session or driver: a process of a real deployment). %v per cell, in %d interleaved rounds per server. The critical section is a blocking `nanosleep` with the thread's timer slack at 1 ns plus a spin for the last %v, not `time.Sleep`: measured before the cells, time.Sleep(%v) took %s µs (median) and the critical section used %s µs. `cs p50` is the critical section measured inside each cell.\n\n", r.cfg.cdur, r.cfg.crounds, spinSlack, r.cfg.cs, us(r.sleep), us(r.work))
	fmt.Fprintf(w, "Handoff = the next holder's Lock returning minus the previous holder's Unlock returning, in acquisition order (negative values, where the next Lock returned first, count as 0 and are flagged); *cross* = only handoffs to another goroutine, also measured from the previous holder's Unlock *call*; *self %%* = acquisitions won by the goroutine that had just released. Wait = from a goroutine's Lock call (failed attempts included) to its return; max includes waits still running at the end. Fairness = max/min acquisitions per goroutine (∞: one never acquired). ME = acquisitions that saw another holder (an atomic counter checked inside every critical section; must be 0).\n\n")
	var a, b [][]string
	for _, s := range r.systems {
		for _, c := range r.con[s] {
			st := c.stats()
			name := bold(s.name, s.kind == kindLocker)
			a = append(a, []string{s.server, name, fmt.Sprint(c.n), fmt.Sprint(c.clients),
				fmt.Sprintf("%.0f", st.rate),
				us(st.handoff.quantile(0.5)) + " / " + us(st.handoff.quantile(0.99)),
				us(st.cross.quantile(0.5)) + " / " + us(st.cross.quantile(0.99)),
				us(st.crossCall.quantile(0.5)) + " / " + us(st.crossCall.quantile(0.99)),
				fmt.Sprintf("%.0f", 100*st.selfShare)})
			cmds := "–"
			if s.server == "redis" {
				cmds = fmt.Sprintf("%.1f", st.cmdsPerAcq)
			}
			b = append(b, []string{s.server, name, fmt.Sprint(c.n),
				ms(st.wait.quantile(0.5)) + " / " + ms(st.wait.quantile(0.99)) + " / " + ms(st.maxWait),
				fmt.Sprintf("%s (%d..%d)", ratio(st.fairness), st.minG, st.maxG),
				fmt.Sprint(c.errors), fmt.Sprint(c.violations), us(st.cs.quantile(0.5)),
				fmt.Sprintf("%.1f", st.tripsPerAcq), cmds, us(st.cpuPerAcq), us(st.srvCPUPerAcq)})
		}
	}
	fmt.Fprintf(w, "**Throughput and handoff**\n\n")
	table(w, "llrrrrrrr", []string{"server", "system", "N", "clients", "acq/s", "handoff p50 / p99 µs", "cross p50 / p99 µs", "cross from Unlock call p50 / p99 µs", "self %"}, a)
	fmt.Fprintf(w, "**Waiting, fairness, correctness, cost**\n\n")
	table(w, "llrrrrrrrrrr", []string{"server", "system", "N", "wait p50 / p99 / max ms", "fairness (min..max)", "lock errors", "ME violations", "cs p50 µs", "round trips/acq", "server cmds/acq", "client CPU µs/acq", "server CPU µs/acq"}, b)
}

// writePerContender compares the systems on the contended cells run with
// one client per goroutine (as N processes, each with one contender):
// locker against the fastest barging peer of the same run.
func (r *report) writePerContender(w io.Writer) {
	var rows [][]string
	for _, n := range r.cfg.ns {
		var best *system
		var bestRate float64
		var bestMax time.Duration
		for _, s := range r.systems {
			if c := r.contendedOn(s, n, n); c != nil && s.kind == kindPeer && s.perContender {
				st := c.stats()
				if best == nil || st.rate > bestRate {
					best, bestRate = s, st.rate
				}
				if st.maxWait > 0 && (bestMax == 0 || st.maxWait < bestMax) {
					bestMax = st.maxWait
				}
			}
		}
		for _, s := range r.systems {
			c := r.contendedOn(s, n, n)
			if c == nil || !s.perContender {
				continue
			}
			st := c.stats()
			rateRatio, waitRatio := "–", "–"
			if best != nil && bestRate > 0 {
				rateRatio = fmt.Sprintf("%.2f×", st.rate/bestRate)
			}
			if bestMax > 0 {
				waitRatio = fmt.Sprintf("%.2f×", float64(st.maxWait)/float64(bestMax))
			}
			rows = append(rows, []string{fmt.Sprint(n), bold(s.name, s.kind == kindLocker),
				fmt.Sprintf("%.0f", st.rate), rateRatio,
				fmt.Sprintf("%s (%d..%d)", ratio(st.fairness), st.minG, st.maxG),
				fmt.Sprintf("%.1f", st.tripsPerAcq), fmt.Sprintf("%.1f", st.cmdsPerAcq),
				ms(st.wait.quantile(0.99)), ms(st.maxWait), waitRatio,
				fmt.Sprintf("%.0f", 100*st.selfShare)})
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "### Contended, one client per contender: N goroutines on one key, each with its own client (as N processes)\n\n")
	fmt.Fprintf(w, "The contended cells above, run again with clients = N: each goroutine has its own go-redis client (and, for locker, its own driver and Client). Ratios are to the fastest peer (acq/s) and to the peer with the shortest longest wait (longest wait) of the same N, peers being the barging libraries (not raw). Round trips = client writes on the counted connections (pub/sub included) per acquisition.\n\n")
	table(w, "rlrrrrrrrrr", []string{"N", "system", "acq/s", "× fastest peer", "fairness (min..max)", "round trips/acq", "server cmds/acq", "wait p99 ms", "longest wait ms", "× best peer's longest", "self %"}, rows)
}

func (r *report) writeMany(w io.Writer) {
	if len(r.many) == 0 {
		return
	}
	m0 := r.many[0]
	fmt.Fprintf(w, "### Many locks: one process holds many locks on distinct keys\n\n")
	fmt.Fprintf(w, "%d locks on Redis, %d on etcd and ZooKeeper (where each lock is a raft write or a znode and 10,000 take tens of seconds to take). Lease %v (etcd and ZooKeeper: at least 3s), renewed every third of it, held for %d renewal periods: shortened from a minute to keep the run under 5 minutes; the counts are per period. Heap per lock = the bench process's heap growth after GC divided by the locks (handles, holds, clients). CPU is over the holding time.\n\n", r.cfg.many, r.cfg.manyOther, m0.ttl, m0.periods)
	var rows [][]string
	for _, m := range r.many {
		if m.err != nil && m.acquire == 0 {
			rows = append(rows, []string{m.sys.server, m.sys.name, fmt.Sprint(m.n), "failed: " + m.err.Error(), "", "", "", "", "", ""})
			continue
		}
		errS := "0"
		if m.err != nil {
			errS = m.err.Error()
		}
		rows = append(rows, []string{m.sys.server, bold(m.sys.name, m.sys.kind == kindLocker), fmt.Sprint(m.n),
			fmt.Sprintf("%.1f", m.acquire.Seconds()),
			fmt.Sprint(m.trips), fmt.Sprintf("%.2f", m.tripsPer100Per),
			fmt.Sprintf("%.2f", float64(m.heapPerLock)/1024),
			fmt.Sprintf("%.1f", 100*m.cpu.Seconds()/m.holding.Seconds()),
			fmt.Sprintf("%.1f", 100*m.srvCPU.Seconds()/m.holding.Seconds()),
			fmt.Sprintf("%d / %s", m.lostN, errS)})
	}
	table(w, "llrrrrrrrl", []string{"server", "system", "locks", "acquire all s", "round trips while holding", "per 100 locks per period", "heap KB per lock", "client CPU % of a core", "server CPU % of a core", "lost / release errors"}, rows)
}

func (r *report) writeSystems(w io.Writer) {
	fmt.Fprintf(w, "### Systems\n\n")
	for _, s := range r.systems {
		fmt.Fprintf(w, "* **%s**: %s\n", s.label(), s.desc)
	}
	for _, m := range r.many {
		fmt.Fprintf(w, "* **%s / %s (many locks)**: %s\n", m.sys.server, m.sys.name, m.sys.desc)
	}
	fmt.Fprintln(w)
}

// writeFlags lists what the harness found worth a second look.
func (r *report) writeFlags(w io.Writer) {
	flags := r.flags()
	if len(flags) == 0 {
		return
	}
	fmt.Fprintf(w, "### Flags raised by the harness\n\n")
	for _, f := range flags {
		fmt.Fprintf(w, "* %s\n", f)
	}
	fmt.Fprintln(w)
}

// flags returns what the harness found worth a second look: mutual
// exclusion violated, starvation, unfairness, long waits, barging, errors,
// lost locks.
func (r *report) flags() []string {
	var flags []string
	add := func(format string, args ...any) { flags = append(flags, fmt.Sprintf(format, args...)) }
	for _, s := range r.systems {
		for _, c := range r.con[s] {
			st := c.stats()
			l := fmt.Sprintf("%s N=%d (%d clients)", s.label(), c.n, c.clients)
			if c.violations > 0 {
				add("%s: MUTUAL EXCLUSION VIOLATED: %d acquisitions saw another holder (up to %d holders)", l, c.violations, c.maxHolders)
			}
			if st.minG == 0 {
				add("%s: starvation: a goroutine never acquired the lock in %v", l, r.cfg.cdur)
			} else if st.fairness > 2 {
				add("%s: unfair: max/min acquisitions per goroutine = %.1f", l, st.fairness)
			}
			if st.maxWait > time.Second || (st.maxWait > 10*st.wait.quantile(0.99) && st.maxWait > 50*time.Millisecond) {
				add("%s: a goroutine waited %s ms for the lock (wait p99 %s ms)", l, ms(st.maxWait), ms(st.wait.quantile(0.99)))
			}
			if st.selfShare > 0.5 {
				add("%s: barging: %.0f%% of acquisitions went to the goroutine that had just released", l, 100*st.selfShare)
			}
			if st.negative > 0 {
				add("%s: %d of %d handoffs had the next Lock return before the previous Unlock did (counted as 0)", l, st.negative, st.handoffs)
			}
			if c.errors > 0 {
				add("%s: %d lock or unlock errors (a library that gave up waiting, or a failed unlock)", l, c.errors)
			}
		}
		if u := r.unc[s]; u != nil && u.errors > 0 {
			add("%s uncontended: %d errors", s.label(), u.errors)
		}
		if p := r.par[s]; p != nil && p.errors > 0 {
			add("%s parallel: %d errors", s.label(), p.errors)
		}
	}
	for _, m := range r.many {
		if m.lostN > 0 || m.err != nil {
			add("%s / %s many locks: %d lost, error %v", m.sys.server, m.sys.name, m.lostN, m.err)
		}
	}
	return flags
}
