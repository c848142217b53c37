package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"runtime"
	"time"
)

// The results of a run as records, one per system, cell and metric: what
// -json writes and -compare reads back from each build's runs.

// record is one number of a run.
type record struct {
	Cell   string  `json:"cell"`
	System string  `json:"system"` // "server / name"
	Metric string  `json:"metric"` // with its unit
	Value  float64 `json:"value"`
	// Lower is set when a lower value is better (latency, cost, errors);
	// otherwise higher is (throughput).
	Lower bool `json:"lower,omitempty"`
	// Primary marks the cell's headline number (its throughput).
	Primary bool `json:"primary,omitempty"`
}

// jsonResults is the file -json writes.
type jsonResults struct {
	Records   []record          `json:"records"`
	Notes     []string          `json:"notes,omitempty"` // cells that failed, servers skipped
	Flags     []string          `json:"flags,omitempty"` // see report.flags
	Servers   map[string]string `json:"servers,omitempty"`
	GoVersion string            `json:"go_version"`
}

func (r *report) writeJSON(path string) error {
	b, err := json.MarshalIndent(jsonResults{
		Records: r.records(), Notes: r.notes, Flags: r.flags(),
		Servers: r.servers, GoVersion: runtime.Version(),
	}, "", "\t")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Cell names of the records.
func cellUncontended() string { return "uncontended: one goroutine, one key" }
func cellParallel(g int) string {
	return fmt.Sprintf("parallel: %d goroutines, distinct keys", g)
}
func cellContended(n, clients int) string {
	if clients == 1 {
		return fmt.Sprintf("one key: N=%d, 1 client", n)
	}
	return fmt.Sprintf("one key: N=%d, %d clients", n, clients)
}
func cellChurn(keys int) string {
	return fmt.Sprintf("churn: %d new keys, one goroutine", keys)
}
func cellMany(server string, n int) string { return fmt.Sprintf("many locks: %d held (%s)", n, server) }

// recorder collects the records of a system and cell.
type recorder struct {
	rs           []record
	cell, system string
}

// add appends a metric; a value that is not a number (a fairness of ∞
// when a goroutine starved, which the flags report) is left out.
func (rc *recorder) add(metric string, v float64, lower, primary bool) {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return
	}
	rc.rs = append(rc.rs, record{Cell: rc.cell, System: rc.system, Metric: metric, Value: v, Lower: lower, Primary: primary})
}

func (rc *recorder) at(cell, system string) *recorder {
	rc.cell, rc.system = cell, system
	return rc
}

func usF(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
func msF(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// perOp returns x/n, or NaN (left out) when n is 0.
func perOp(x float64, n int) float64 {
	if n == 0 {
		return math.NaN()
	}
	return x / float64(n)
}

// records returns the results of the run, in table order.
func (r *report) records() []record {
	var rc recorder
	const lower, higher = true, false
	for _, s := range r.systems {
		if u := r.unc[s]; u != nil && u.pairs > 0 {
			a := rc.at(cellUncontended(), s.label())
			a.add("pairs/s", rate(u.pairs, u.d.elapsed), higher, true)
			a.add("p50 µs", usF(u.lat.quantile(0.5)), lower, false)
			a.add("p99 µs", usF(u.lat.quantile(0.99)), lower, false)
			a.add("client CPU µs/pair", perOp(usF(u.d.cpu), u.pairs), lower, false)
			a.add("round trips/pair", perOp(float64(u.d.trips), u.pairs), lower, false)
			if s.server == "redis" {
				a.add("server cmds/pair", perOp(float64(u.d.cmds.total()), u.pairs), lower, false)
			}
			a.add("allocs/pair", perOp(float64(u.d.mallocs), u.pairs), lower, false)
			a.add("errors", float64(u.errors), lower, false)
		}
	}
	for _, s := range r.systems {
		if p := r.par[s]; p != nil && p.pairs > 0 {
			a := rc.at(cellParallel(p.goroutines), s.label())
			a.add("pairs/s", rate(p.pairs, p.d.elapsed), higher, true)
			a.add("p99 µs", usF(p.lat.quantile(0.99)), lower, false)
			a.add("client CPU µs/pair", perOp(usF(p.d.cpu), p.pairs), lower, false)
			a.add("round trips/pair", perOp(float64(p.d.trips), p.pairs), lower, false)
			a.add("allocs/pair", perOp(float64(p.d.mallocs), p.pairs), lower, false)
			a.add("errors", float64(p.errors), lower, false)
		}
	}
	r.contendedRecords(&rc)
	for _, s := range r.systems {
		if c := r.churn[s]; c != nil && c.pairs > 0 {
			a := rc.at(cellChurn(r.cfg.churnKeys), s.label())
			a.add("pairs/s", rate(c.pairs, c.d.elapsed), higher, true)
			a.add("p50 µs", usF(c.lat.quantile(0.5)), lower, false)
			a.add("p99 µs", usF(c.lat.quantile(0.99)), lower, false)
			a.add("client CPU µs/pair", perOp(usF(c.d.cpu), c.pairs), lower, false)
			a.add("round trips/pair", perOp(float64(c.d.trips), c.pairs), lower, false)
			a.add("allocs/pair", perOp(float64(c.d.mallocs), c.pairs), lower, false)
			a.add("errors", float64(c.errors), lower, false)
		}
	}
	for _, m := range r.many {
		if m.acquire == 0 { // failed before holding: in the flags
			continue
		}
		a := rc.at(cellMany(m.sys.server, m.n), m.sys.server+" / "+m.sys.name)
		a.add("locks acquired/s", float64(m.n)/m.acquire.Seconds(), higher, true)
		a.add("round trips per 100 locks per period", m.tripsPer100Per, lower, false)
		a.add("heap KB per lock", float64(m.heapPerLock)/1024, lower, false)
		a.add("client CPU % of a core", 100*m.cpu.Seconds()/m.holding.Seconds(), lower, false)
		a.add("lost", float64(m.lostN), lower, false)
	}
	return rc.rs
}

// contendedRecords adds the records of the contended cells, by N.
func (r *report) contendedRecords(rc *recorder) {
	const lower, higher = true, false
	for _, n := range r.cfg.ns {
		for _, s := range r.systems {
			for _, c := range r.con[s] {
				if c.n != n {
					continue
				}
				st := c.stats()
				a := rc.at(cellContended(c.n, c.clients), s.label())
				a.add("acq/s", st.rate, higher, true)
				a.add("wait p99 ms", msF(st.wait.quantile(0.99)), lower, false)
				a.add("longest wait ms", msF(st.maxWait), lower, false)
				a.add("fairness (max/min)", st.fairness, lower, false)
				a.add("round trips/acq", st.tripsPerAcq, lower, false)
				if s.server == "redis" {
					a.add("server cmds/acq", st.cmdsPerAcq, lower, false)
				}
				a.add("client CPU µs/acq", usF(st.cpuPerAcq), lower, false)
				a.add("ME violations", float64(c.violations), lower, false)
				a.add("errors", float64(c.errors), lower, false)
			}
		}
	}
}
