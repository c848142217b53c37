package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// -compare: two builds of locker in one run, in interleaved rounds.
//
// compare.sh builds this bench against two revisions of locker and runs
// one of the two binaries with -compare OLD,NEW. That process starts the
// servers once and, in each of -compare-rounds rounds, runs every selected
// cell of every selected server in the old binary and then in the new one,
// each run a child process that uses the shared servers (-use-servers) and
// writes its results as JSON (-json). Machine drift then falls on both
// builds alike. It prints, per cell, the old and new medians over the
// rounds and their ratio.

// compareConfig is what the -compare flags select.
type compareConfig struct {
	bins   string // "OLD,NEW": paths of the two bench binaries
	rounds int
	names  string // "OLD,NEW": how the report names the builds
	cmd    string // the command that reproduces the comparison
	keep   string // directory to keep each run's JSON and markdown in
	abba   bool   // new before old in every other round
	settle time.Duration
}

func cmpFlags(fs *flag.FlagSet, c *compareConfig) {
	fs.StringVar(&c.bins, "compare", "", "compare two bench binaries built against two revisions of locker (see compare.sh): OLD,NEW; runs the selected cells alternately in old and new on servers started once, and prints the medians and new/old per cell")
	fs.IntVar(&c.rounds, "compare-rounds", 4, "with -compare: interleaved rounds (each build runs every selected cell once per round, for -d or -cd)")
	fs.StringVar(&c.names, "compare-names", "old,new", "with -compare: names of the two builds in the report")
	fs.StringVar(&c.cmd, "compare-cmd", "", "with -compare: the command the report names as the one that reproduces it (compare.sh sets it)")
	fs.BoolVar(&c.abba, "compare-abba", true, "with -compare: run new before old in every other round (old, new, new, old, ...), so that neither build always runs right after the other's run of a cell, nor first after the previous cell; -compare-abba=false runs old, new in every round")
	fs.DurationVar(&c.settle, "compare-settle", 250*time.Millisecond, "with -compare: pause before each run, for the servers to finish with the previous one")
	fs.StringVar(&c.keep, "compare-keep", "", "with -compare: keep each run's JSON and markdown report in this directory")
}

// lockerOnly selects locker's own systems (not the peers, the raw floors or
// the quorum over three extra servers).
const lockerOnly = `^[a-z]+ / locker( 1 driver)?$`

// cmpDefaultFlags are the defaults of flags in -compare mode, where each
// duration is one round's: 4 rounds of the five cell kinds on Redis, etcd
// and ZooKeeper take about 7 minutes on 2 cores (shared, loaded).
var cmpDefaultFlags = map[string]string{
	"d": "1s", "cd": "1s", "warmup": "200ms",
	"servers": "redis,etcd,zk", "only": lockerOnly,
	"many-other": "1000", "periods": "2", "churn-keys": "2000",
}

// cmpDefaults sets the flags not given on the command line to their
// -compare defaults.
func cmpDefaults(fs *flag.FlagSet, set map[string]bool) {
	for name, v := range cmpDefaultFlags {
		if !set[name] {
			if err := fs.Set(name, v); err != nil {
				panic(err) // a bad default is a bug
			}
		}
	}
}

// extServer is a server another process started (-use-servers).
type extServer struct {
	addr string
	pid  int
}

// parseExtServers parses "name=host:port@pid,...".
func parseExtServers(spec string) (map[string]extServer, error) {
	m := map[string]extServer{}
	if spec == "" {
		return m, nil
	}
	for f := range strings.SplitSeq(spec, ",") {
		name, rest, ok := strings.Cut(f, "=")
		addr, pidS, ok2 := strings.Cut(rest, "@")
		pid, err := strconv.Atoi(pidS)
		if !ok || !ok2 || err != nil || addr == "" {
			return nil, fmt.Errorf("bad -use-servers entry %q (want name=host:port@pid)", f)
		}
		switch name {
		case "redis", "etcd", "zk":
		default:
			return nil, fmt.Errorf("bad -use-servers entry %q: no server %q", f, name)
		}
		m[name] = extServer{addr, pid}
	}
	return m, nil
}

// formatExtServers is the -use-servers value naming the running servers
// of e.
func (e *env) formatExtServers() string {
	var parts []string
	for _, name := range []string{"redis", "etcd", "zk", "nats"} {
		if s := e.srv(name); s != nil {
			parts = append(parts, fmt.Sprintf("%s=%s@%d", name, s.addr, s.pid()))
		}
	}
	return strings.Join(parts, ",")
}

// attachServers uses the selected servers of -use-servers, started by
// another process, and leaves them running at the end.
func (e *env) attachServers(rep *report) error {
	for _, name := range []string{"redis", "etcd", "zk"} {
		x, ok := e.cfg.useServers[name]
		if !e.cfg.servers[name] {
			continue
		}
		if !ok {
			rep.notef("%s skipped: not in -use-servers", name)
			continue
		}
		s := &server{name: name, addr: x.addr, extPID: x.pid}
		switch name {
		case "redis":
			e.redis = s
		case "etcd":
			e.etcd = s
		case "zk":
			e.zk = s
		case "nats":
			e.nats = s
		}
		rep.servers[name] = serverVersion(name, s)
	}
	return nil
}

// cmpCell is one cell kind of one server: what one child run measures.
type cmpCell struct{ server, cell string }

// childArgs are the flags of one child run: one round of one cell kind
// on one server, on the shared servers.
func childArgs(cfg config, c cmpCell, servers, jsonPath string) []string {
	ns := make([]string, len(cfg.ns))
	for i, n := range cfg.ns {
		ns[i] = strconv.Itoa(n)
	}
	args := []string{
		"-servers", c.server, "-cells", c.cell, "-rounds", "1", "-crounds", "1",
		"-d", cfg.dur.String(), "-cd", cfg.cdur.String(), "-warmup", cfg.warmup.String(),
		"-cs", cfg.cs.String(), "-parallel", strconv.Itoa(cfg.parallel), "-n", strings.Join(ns, ","),
		"-many", strconv.Itoa(cfg.many), "-many-other", strconv.Itoa(cfg.manyOther),
		"-periods", strconv.Itoa(cfg.periods), "-churn-keys", strconv.Itoa(cfg.churnKeys), "-many-ttl", cfg.manyTTL.String(),
		"-per-contender=" + strconv.FormatBool(cfg.perContender),
	}
	if cfg.only != nil {
		args = append(args, "-only", cfg.only.String())
	}
	if servers != "" {
		args = append(args, "-use-servers", servers)
	}
	return append(args, "-json", jsonPath)
}

// series is one metric of one system in one cell, per build and round
// (NaN where a run did not report it).
type series struct {
	record // the first record seen; Value unused
	vals   [2][]float64
}

// comparison collects the runs of -compare.
type comparison struct {
	rounds int
	order  []*series
	byKey  map[[3]string]*series
	notes  []string
	flags  [2]int // flags the runs raised, by build
}

func newComparison(rounds int) *comparison {
	return &comparison{rounds: rounds, byKey: map[[3]string]*series{}}
}

func (c *comparison) add(side, round int, rs []record) {
	for _, r := range rs {
		k := [3]string{r.Cell, r.System, r.Metric}
		s := c.byKey[k]
		if s == nil {
			s = &series{record: r}
			for i := range s.vals {
				s.vals[i] = make([]float64, c.rounds)
				for j := range s.vals[i] {
					s.vals[i][j] = math.NaN()
				}
			}
			c.byKey[k] = s
			c.order = append(c.order, s)
		}
		s.vals[side][round] = r.Value
	}
}

// median returns the median of the numbers among vs, NaN if none.
func median(vs []float64) float64 {
	var xs []float64
	for _, v := range vs {
		if !math.IsNaN(v) {
			xs = append(xs, v)
		}
	}
	if len(xs) == 0 {
		return math.NaN()
	}
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// roundRatios returns the smallest and largest new/old of the rounds where
// both builds reported a non-zero old value.
func (s *series) roundRatios() (lo, hi float64, ok bool) {
	for i := range s.vals[0] {
		o, n := s.vals[0][i], s.vals[1][i]
		if math.IsNaN(o) || math.IsNaN(n) || o == 0 {
			continue
		}
		r := n / o
		if !ok {
			lo, hi, ok = r, r, true
		}
		lo, hi = min(lo, r), max(hi, r)
	}
	return lo, hi, ok
}

// ratio returns new/old of the medians; ok is false where old's is 0 or
// missing.
func (s *series) ratio() (float64, bool) {
	o, n := median(s.vals[0]), median(s.vals[1])
	if math.IsNaN(o) || math.IsNaN(n) || o == 0 {
		return 0, false
	}
	return n / o, true
}

// num formats a metric's value with three significant digits or so.
func num(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "–"
	case a >= 100 || a == 0:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// verdict says how new compares with old on a metric: within 5 % (the
// medians' ratio), or worse or better by more, and then whether every
// round agrees; where the rounds disagree the noise is larger than the
// difference, and more rounds or longer cells resolve it.
func (s *series) verdict() string {
	q, ok := s.ratio()
	if !ok {
		o, n := median(s.vals[0]), median(s.vals[1])
		if o == 0 && n == 0 {
			return "same"
		}
		return "–"
	}
	lo, hi, _ := s.roundRatios()
	if s.Lower && q != 0 && lo != 0 {
		q, lo, hi = 1/q, 1/hi, 1/lo
	}
	n := s.pairedRounds()
	switch {
	case q >= 0.95 && q <= 1.05:
		return "within 5 %"
	case q < 0.95 && hi < 1:
		return fmt.Sprintf("**worse** in all %d rounds", n)
	case q > 1.05 && lo > 1:
		return fmt.Sprintf("better in all %d rounds", n)
	case q < 0.95:
		return "worse, rounds disagree"
	}
	return "better, rounds disagree"
}

// pairedRounds returns the number of rounds both builds reported.
func (s *series) pairedRounds() int {
	n := 0
	for i := range s.vals[0] {
		if !math.IsNaN(s.vals[0][i]) && !math.IsNaN(s.vals[1][i]) {
			n++
		}
	}
	return n
}

func (s *series) row(withSystem bool) []string {
	var row []string
	if withSystem {
		row = append(row, s.Cell)
	}
	row = append(row, s.System, s.Metric, num(median(s.vals[0])), num(median(s.vals[1])))
	if q, ok := s.ratio(); ok {
		row = append(row, fmt.Sprintf("%.3f", q))
	} else {
		row = append(row, "–")
	}
	if lo, hi, ok := s.roundRatios(); ok {
		row = append(row, fmt.Sprintf("%.2f–%.2f", lo, hi))
	} else {
		row = append(row, "–")
	}
	return row
}

func orderNote(abba bool) string {
	if abba {
		return "both builds, old first in odd rounds and new first in even ones (-compare-abba)"
	}
	return "old and then in new (-compare-abba=false)"
}

// sum returns the sum of the numbers among vs.
func sum(vs []float64) float64 {
	var t float64
	for _, v := range vs {
		if !math.IsNaN(v) {
			t += v
		}
	}
	return t
}

func perRound(vs []float64) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = num(v)
	}
	return strings.Join(parts, " / ")
}

// cmpHeader is what the report says about the run.
type cmpHeader struct {
	names   [2]string
	cmd     string
	child   string // one child run's command line
	servers map[string]string
	elapsed time.Duration
	cfg     config
	runs    int
	goVer   string
}

func (c *comparison) write(w io.Writer, h cmpHeader) {
	fmt.Fprintf(w, "### %s against %s: interleaved rounds\n\n", h.names[1], h.names[0])
	fmt.Fprintf(w, "Command: `%s`; run time %s.\n\n", h.cmd, h.elapsed.Round(time.Second))
	fmt.Fprintf(w, "Machine: %s. %s. ", machine(), h.goVer)
	var srv []string
	for _, k := range []string{"redis", "etcd", "zk"} {
		if v := h.servers[k]; v != "" {
			srv = append(srv, v)
		}
	}
	if len(srv) > 0 {
		fmt.Fprintf(w, "Servers, started once and shared by both builds: %s.", strings.Join(srv, "; "))
	}
	fmt.Fprintf(w, "\n\n")
	fmt.Fprintf(w, "Builds: old = %s, new = %s, each a bench binary built against its revision of locker. "+
		"%d rounds; in each, every cell kind of every server ran in %s, one process per run (%d runs, %v apart), "+
		"each run one round of %v (uncontended, parallel) or %v (each contended cell); churn %d new keys per run; many locks held for %d renewal periods of %v. "+
		"One run: `bench %s`.\n\n",
		h.names[0], h.names[1], c.rounds, orderNote(h.cfg.cmp.abba), h.runs, h.cfg.cmp.settle, h.cfg.dur, h.cfg.cdur, h.cfg.churnKeys, h.cfg.periods, h.cfg.manyTTL/3, h.child)
	fmt.Fprintf(w, "Old and new are the medians over the rounds; new/old is their ratio; per-round is the range of new/old within each round (old's run and new's next to it), which shows the noise. "+
		"Higher is better for the rates (/s), lower for the rest. *Verdict*: within 5 %% when new/old of the medians is within 0.95–1.05; otherwise worse or better, *in all rounds* when each round's new/old is on the same side of 1, and *rounds disagree* when not (the noise is larger than the difference: more rounds or longer cells resolve it). Noise alone puts all %d rounds on one side 1 time in %d: confirm a row that says so with a second run before calling it a regression.\n\n", c.rounds, 1<<max(c.rounds-1, 0))
	notes := slices.Clone(c.notes)
	for _, s := range c.order {
		if s.Metric == "ME violations" || s.Metric == "lost" || s.Metric == "errors" {
			for side, vs := range s.vals {
				if total := sum(vs); total > 0 {
					notes = append(notes, fmt.Sprintf("**%s: %s, %s: %s %.0f in all**", h.names[side], s.System, s.Cell, s.Metric, total))
				}
			}
		}
	}
	if c.flags[0]+c.flags[1] > 0 {
		notes = append(notes, fmt.Sprintf("the runs raised %d (%s) and %d (%s) of the harness's flags (barging, unfairness, long waits, handoffs before the Unlock returned): see each run's report, kept with -compare-keep", c.flags[0], h.names[0], c.flags[1], h.names[1]))
	}
	for _, n := range notes {
		fmt.Fprintf(w, "* %s\n", n)
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
	}
	c.writeTables(w, h)
}

// writeTables writes the summary, every cell's headline number, and one
// table per cell with every metric.
func (c *comparison) writeTables(w io.Writer, h cmpHeader) {
	var rows [][]string
	for _, s := range c.order {
		if s.Primary {
			rows = append(rows, append(s.row(true), s.verdict()))
		}
	}
	if len(rows) == 0 {
		fmt.Fprintf(w, "No cell reported a result.\n\n")
		return
	}
	fmt.Fprintf(w, "#### Summary: throughput of every cell\n\n")
	table(w, "lllrrrrl", []string{"cell", "system", "metric", h.names[0], h.names[1], "new/old", "per-round new/old", "verdict"}, rows)
	var cells []string
	for _, s := range c.order {
		if !slices.Contains(cells, s.Cell) {
			cells = append(cells, s.Cell)
		}
	}
	for _, cell := range cells {
		fmt.Fprintf(w, "#### %s\n\n", cell)
		var rows [][]string
		for _, s := range c.order {
			if s.Cell == cell {
				rows = append(rows, append(s.row(false), perRound(s.vals[0]), perRound(s.vals[1])))
			}
		}
		table(w, "llrrrrll", []string{"system", "metric", h.names[0], h.names[1], "new/old", "per-round new/old", h.names[0] + " per round", h.names[1] + " per round"}, rows)
	}
}

// runCompare runs the comparison cfg.cmp selects and writes the report to
// out, its progress to log.
func runCompare(cfg config, out, log io.Writer) error {
	started := time.Now()
	bins, names, err := cmpBuilds(cfg.cmp)
	if err != nil {
		return err
	}
	dir := cfg.cmp.keep
	if dir == "" {
		tmp, err := os.MkdirTemp("", "locker-bench-compare-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	e := newEnv(cfg)
	rep := newReport(cfg)
	defer e.stopServers()
	if err := e.startServers(rep); err != nil {
		return err
	}
	defer e.stopOnInterrupt(log)()
	if e.zk != nil {
		// The JVM compiles ZooKeeper's hot paths only after a while:
		// warm it once, for both builds.
		if err := warmZK(e, 10*cfg.warmup); err != nil {
			return fmt.Errorf("warming up ZooKeeper: %w", err)
		}
	}
	cells := e.cmpCells()
	if len(cells) == 0 {
		return errors.New("-compare: no cell selected on a running server")
	}
	cmp := newComparison(cfg.cmp.rounds)
	cmp.notes = rep.notes
	runs := cmp.runRounds(cfg, cells, bins, names, e.formatExtServers(), dir, log)
	cmd := cfg.cmp.cmd
	if cmd == "" {
		cmd = "bench " + strings.Join(os.Args[1:], " ")
	}
	cmp.write(out, cmpHeader{
		names: names, cmd: cmd, servers: rep.servers,
		// One run's command line, without the servers (this run's).
		child:   quoteArgs(childArgs(cfg, cells[0], "", "FILE")),
		elapsed: time.Since(started), cfg: cfg, runs: runs, goVer: runtime.Version(),
	})
	return nil
}

// cmpBuilds returns the absolute paths of the two binaries of -compare and
// their names.
func cmpBuilds(c compareConfig) (bins, names [2]string, err error) {
	bs, ns := strings.Split(c.bins, ","), strings.Split(c.names, ",")
	if len(bs) != 2 || len(ns) != 2 {
		return bins, names, errors.New("-compare and -compare-names take two comma-separated values: old,new")
	}
	if c.rounds < 1 {
		return bins, names, errors.New("-compare-rounds must be at least 1")
	}
	for i := range bins {
		p, err := filepath.Abs(bs[i])
		if err == nil {
			_, err = os.Stat(p)
		}
		if err != nil {
			return bins, names, fmt.Errorf("-compare: %w", err)
		}
		bins[i], names[i] = p, ns[i]
	}
	return bins, names, nil
}

// cmpCells returns the selected cell kinds of the running servers, in
// the order the runs take them.
func (e *env) cmpCells() []cmpCell {
	var cells []cmpCell
	for _, srv := range []string{"redis", "etcd", "zk", "mem", "mongo"} {
		if !e.available(srv) {
			continue
		}
		for _, cell := range []string{"u", "p", "c", "churn", "many"} {
			if e.cfg.cells[cell] && (cell != "many" || srv != "mem") {
				cells = append(cells, cmpCell{srv, cell})
			}
		}
	}
	return cells
}

// runRounds runs every cell in both builds in each round, each run a
// child process on the shared servers with its files in dir, and returns
// the number of runs.
func (c *comparison) runRounds(cfg config, cells []cmpCell, bins, names [2]string, shared, dir string, log io.Writer) int {
	runs := 0
	for round := range cfg.cmp.rounds {
		order := []int{0, 1}
		if cfg.cmp.abba && round%2 == 1 {
			order = []int{1, 0}
		}
		for _, cell := range cells {
			for _, side := range order {
				runs++
				time.Sleep(cfg.cmp.settle)
				fmt.Fprintf(log, "round %d/%d: %s %s, %s\n", round+1, cfg.cmp.rounds, cell.server, cell.cell, names[side])
				what := fmt.Sprintf("%s, round %d, %s %s", names[side], round+1, cell.server, cell.cell)
				base := filepath.Join(dir, fmt.Sprintf("r%d-%s-%s-%s", round+1, cell.server, cell.cell, [2]string{"old", "new"}[side]))
				res, err := runChild(bins[side], childArgs(cfg, cell, shared, base+".json"), base)
				if err != nil {
					c.notes = append(c.notes, fmt.Sprintf("%s: run failed: %v", what, err))
					continue
				}
				for _, n := range res.Notes {
					c.notes = append(c.notes, fmt.Sprintf("%s: %s", what, n))
				}
				c.flags[side] += len(res.Flags)
				c.add(side, round, res.Records)
			}
		}
	}
	return runs
}

// runChild runs one bench binary with args, its markdown report going to
// base.md, and returns the results it wrote as JSON.
func runChild(bin string, args []string, base string) (*jsonResults, error) {
	md, err := os.Create(base + ".md")
	if err != nil {
		return nil, err
	}
	defer md.Close()
	var stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = md, &stderr
	if err := cmd.Run(); err != nil {
		msg := lastLines(stderr.String(), 5)
		for line := range strings.SplitSeq(stderr.String(), "\n") {
			if strings.HasPrefix(line, "flag provided but not defined") {
				msg = line + " (a bench from before -compare: build both from the same sources, compare.sh -src here)"
				break
			}
		}
		return nil, fmt.Errorf("%w: %s", err, msg)
	}
	b, err := os.ReadFile(args[len(args)-1])
	if err != nil {
		return nil, err
	}
	var res jsonResults
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("reading %s: %w", args[len(args)-1], err)
	}
	return &res, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// quoteArgs formats args for a shell.
func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " $^()|?*[]'\"\\") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}
