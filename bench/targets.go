package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// target is one of the performance targets (issues 6 and 18), evaluated
// on this run.
type target struct {
	area, what string
	variant    string // which locker system: "", "4 drivers", "1 driver"
	got, bar   string
	met        bool
	measured   bool
}

// bestPeer returns the peer of server with the highest (or, with low, the
// lowest) value of f among those f reports ok for.
func (r *report) bestPeer(server string, low bool, f func(*system) (float64, bool)) (*system, float64) {
	var best *system
	var bv float64
	for _, s := range r.systems {
		if s.server != server || s.kind != kindPeer {
			continue
		}
		v, ok := f(s)
		if !ok {
			continue
		}
		if best == nil || (low && v < bv) || (!low && v > bv) {
			best, bv = s, v
		}
	}
	return best, bv
}

func (r *report) uncRate(s *system) (float64, bool) {
	u := r.unc[s]
	if u == nil || u.pairs == 0 {
		return 0, false
	}
	return rate(u.pairs, u.d.elapsed), true
}

func (r *report) uncAllocs(s *system) (float64, bool) {
	u := r.unc[s]
	if u == nil || u.pairs == 0 {
		return 0, false
	}
	return float64(u.d.mallocs) / float64(u.pairs), true
}

func (r *report) parRate(s *system) (float64, bool) {
	p := r.par[s]
	if p == nil || p.pairs == 0 {
		return 0, false
	}
	return rate(p.pairs, p.d.elapsed), true
}

func (r *report) churnRate(s *system) (float64, bool) {
	c := r.churn[s]
	if c == nil || c.pairs == 0 {
		return 0, false
	}
	return rate(c.pairs, c.d.elapsed), true
}

// ratioTarget adds the target "what ≥ k× the other" for locker system s
// (variant label) against o, measured by f, or an unmeasured row.
func (r *report) ratioTarget(ts *targetList, area, what, label string, s, o *system, k float64, f func(*system) (float64, bool)) {
	v, ok := f(s)
	pv, pok := f(o)
	if s == nil || o == nil || !ok || !pok {
		ts.add(target{area: area, what: what, variant: label})
		return
	}
	ts.add(target{area, what, label, fmt.Sprintf("%.0f (%.2f×)", v, v/pv), fmt.Sprintf("%s %.0f", o.name, pv), v >= k*pv, true})
}

func (r *report) conStat(n int, f func(contendedStats) float64) func(*system) (float64, bool) {
	return func(s *system) (float64, bool) {
		c := r.contended(s, n)
		if c == nil {
			return 0, false
		}
		return f(c.stats()), true
	}
}

// variant is a locker system of a server in the contended cells.
type variant struct{ name, label string }

func variants() []variant {
	return []variant{{"locker", "4 drivers"}, {"locker 1 driver", "1 driver"}}
}

// A targetList collects the targets of a report.
type targetList []target

func (ts *targetList) add(t target) { *ts = append(*ts, t) }

func unmeasured(area, what string) target { return target{area: area, what: what} }

func msD(v float64) string { return ms(time.Duration(v)) + " ms" }

func (r *report) targets() []target {
	var ts targetList
	r.redisTargets(&ts)
	r.redisContendedTargets(&ts)
	r.redisPerContenderTargets(&ts)
	r.etcdTargets(&ts)
	r.zkTargets(&ts)
	r.manyTargets(&ts)
	r.newMutexTargets(&ts)
	return ts
}

// redisTargets are the uncontended Redis and quorum targets.
func (r *report) redisTargets(ts *targetList) {
	add := ts.add
	lr := r.find("redis", "locker")
	if v, ok := r.uncRate(lr); ok {
		p, pv := r.bestPeer("redis", false, r.uncRate)
		if p != nil {
			add(target{"Redis", "uncontended pairs/s ≥ 1.0× the best peer", "", fmt.Sprintf("%.0f (%.2f×)", v, v/pv), fmt.Sprintf("%s %.0f", p.name, pv), v >= pv, true})
		}
		u := r.unc[lr]
		trips := float64(u.d.trips) / float64(u.pairs)
		add(target{"Redis", "uncontended round trips per pair = 2", "", fmt.Sprintf("%.2f", trips), "2", trips <= 2.005, true})
		av, _ := r.uncAllocs(lr)
		if p, pv := r.bestPeer("redis", true, r.uncAllocs); p != nil {
			add(target{"Redis", "allocations per pair ≤ the best peer's", "", fmt.Sprintf("%.1f", av), fmt.Sprintf("%s %.1f", p.name, pv), av <= pv, true})
		}
		if q := r.find("redis", "locker quorum 3"); q != nil {
			if qv, ok := r.uncRate(q); ok {
				add(target{"Redis quorum", "uncontended pair latency with 3 members ≤ 1.5× single Redis", "", fmt.Sprintf("%.2f×", v/qv), "1.5×", v/qv <= 1.5, true})
				if p := r.find("redis", "redsync 3 pools"); p != nil {
					if pv, ok := r.uncRate(p); ok {
						add(target{"Redis quorum", "uncontended pairs/s with 3 members vs redsync with 3 pools", "", fmt.Sprintf("%.0f (%.2f×)", qv, qv/pv), fmt.Sprintf("redsync 3 pools %.0f", pv), qv >= pv, true})
					}
				}
			}
		}
	} else {
		add(unmeasured("Redis", "uncontended"))
	}
}

// redisContendedTargets are the Redis targets at N=32.
func (r *report) redisContendedTargets(ts *targetList) {
	add := ts.add
	for _, v := range variants() {
		c := r.contended(r.find("redis", v.name), 32)
		if c == nil {
			add(target{area: "Redis", what: "N=32 contended", variant: v.label})
			continue
		}
		st := c.stats()
		if p, pv := r.bestPeer("redis", false, r.conStat(32, func(s contendedStats) float64 { return s.rate })); p != nil {
			add(target{"Redis", "N=32 acquisitions/s ≥ 0.7× the best peer", v.label, fmt.Sprintf("%.0f (%.2f×)", st.rate, st.rate/pv), fmt.Sprintf("%s %.0f", p.name, pv), st.rate >= 0.7*pv, true})
		}
		p99 := float64(st.wait.quantile(0.99))
		if p, pv := r.bestPeer("redis", true, r.conStat(32, func(s contendedStats) float64 { return float64(s.wait.quantile(0.99)) })); p != nil {
			add(target{"Redis", "N=32 wait p99 ≤ 1/5 of the best peer's", v.label, msD(p99), fmt.Sprintf("%s %s (1/5: %s)", p.name, msD(pv), msD(pv/5)), p99 <= pv/5, true})
		}
		add(target{"Redis", "N=32 max wait ≤ 50 ms", v.label, ms(st.maxWait) + " ms", "50 ms", st.maxWait <= 50*time.Millisecond, true})
		add(target{"Redis", "N=32 fairness (max/min) ≤ 2", v.label, ratio(st.fairness), "2", st.fairness <= 2, true})
		add(target{"Redis", "N=32 no goroutine starved", v.label, fmt.Sprintf("min %d acquisitions", st.minG), "> 0", st.minG > 0, true})
	}

}

// redisPerContenderTargets are the Redis targets of one key with one
// client per contender (as N processes), at each N of the run: against
// the fastest barging peer's acquisitions/s and the shortest of the
// peers' longest waits.
func (r *report) redisPerContenderTargets(ts *targetList) {
	add := ts.add
	lr := r.find("redis", "locker")
	for _, n := range r.cfg.ns {
		c := r.contendedOn(lr, n, n)
		if c == nil {
			add(target{area: "Redis", what: fmt.Sprintf("N=%d, one client per contender", n)})
			continue
		}
		st := c.stats()
		var fast, calm *system
		var fastRate float64
		var calmMax time.Duration
		for _, s := range r.systems {
			pc := r.contendedOn(s, n, n)
			if pc == nil || s.server != "redis" || s.kind != kindPeer {
				continue
			}
			ps := pc.stats()
			if fast == nil || ps.rate > fastRate {
				fast, fastRate = s, ps.rate
			}
			if ps.maxWait > 0 && (calm == nil || ps.maxWait < calmMax) {
				calm, calmMax = s, ps.maxWait
			}
		}
		what := func(t string) string { return fmt.Sprintf("N=%d, one client per contender: %s", n, t) }
		if fast != nil {
			add(target{"Redis", what("acquisitions/s ≥ 0.7× the fastest peer"), "", fmt.Sprintf("%.0f (%.2f×)", st.rate, st.rate/fastRate), fmt.Sprintf("%s %.0f", fast.name, fastRate), st.rate >= 0.7*fastRate, true})
		}
		add(target{"Redis", what("fairness (max/min) ≤ 1.1"), "", ratio(st.fairness), "1.1", st.fairness <= 1.1, true})
		if calm != nil {
			add(target{"Redis", what("longest wait ≤ 1/5 of the best peer's"), "", ms(st.maxWait) + " ms", fmt.Sprintf("%s %s ms (1/5: %s ms)", calm.name, ms(calmMax), ms(calmMax/5)), st.maxWait <= calmMax/5, true})
		}
		add(target{"Redis", what("round trips per acquisition ≤ 3"), "", fmt.Sprintf("%.2f", st.tripsPerAcq), "3", st.tripsPerAcq <= 3.005, true})
	}
}

// etcdTargets are the etcd targets.
func (r *report) etcdTargets(ts *targetList) {
	add := ts.add
	le, em := r.find("etcd", "locker"), r.find("etcd", "concurrency.Mutex")
	if v, ok := r.uncRate(le); ok {
		if pv, ok := r.uncRate(em); ok {
			add(target{"etcd", "uncontended pairs/s ≥ 1.0× concurrency.Mutex", "", fmt.Sprintf("%.0f (%.2f×)", v, v/pv), fmt.Sprintf("%.0f", pv), v >= pv, true})
		}
	} else {
		add(unmeasured("etcd", "uncontended"))
	}
	r.ratioTarget(ts, "etcd", "16 goroutines on distinct keys: pairs/s ≥ 1.0× concurrency.Mutex", "4 drivers", le, em, 1, r.parRate)
	raw := r.find("etcd", "raw")
	for _, vr := range variants() {
		r.ratioTarget(ts, "etcd", "N=8 acquisitions/s ≥ 0.9× the raw two-write ceiling", vr.label, r.find("etcd", vr.name), raw, 0.9,
			r.conStat(8, func(s contendedStats) float64 { return s.rate }))
	}
}

// zkTargets are the ZooKeeper targets.
func (r *report) zkTargets(ts *targetList) {
	add := ts.add
	lz, zl := r.find("zk", "locker"), r.find("zk", "zk.Lock")
	if v, ok := r.uncRate(lz); ok {
		if pv, ok := r.uncRate(zl); ok {
			add(target{"ZooKeeper", "uncontended pairs/s ≥ 1.0× zk.Lock", "", fmt.Sprintf("%.0f (%.2f×)", v, v/pv), fmt.Sprintf("%.0f", pv), v >= pv, true})
		}
	} else {
		add(unmeasured("ZooKeeper", "uncontended"))
	}
	for _, vr := range variants() {
		r.ratioTarget(ts, "ZooKeeper", "16 goroutines on distinct keys: pairs/s ≥ 1.0× zk.Lock", vr.label, r.find("zk", vr.name), zl, 1, r.parRate)
	}
	if av, ok := r.uncAllocs(lz); ok {
		if pv, ok := r.uncAllocs(zl); ok {
			add(target{"ZooKeeper", "allocations per uncontended pair ≤ zk.Lock's", "", fmt.Sprintf("%.1f", av), fmt.Sprintf("%.1f", pv), av <= pv+0.05, true})
		}
	}
	r.ratioTarget(ts, "ZooKeeper", "lock+unlock of 1000 new keys: pairs/s ≥ 1.0× zk.Lock", "", lz, zl, 1, r.churnRate)
	for _, vr := range variants() {
		c := r.contended(r.find("zk", vr.name), 8)
		if c == nil {
			add(target{area: "ZooKeeper", what: "N=8 contended", variant: vr.label})
			continue
		}
		st := c.stats()
		add(target{"ZooKeeper", "N=8 fairness ≤ 1.1", vr.label, ratio(st.fairness), "1.1", st.fairness <= 1.1, true})
		if pc := r.contended(zl, 8); pc != nil {
			pst := pc.stats()
			h, ph := st.handoff.quantile(0.5), pst.handoff.quantile(0.5)
			add(target{"ZooKeeper", "N=8 handoff p50 ≤ zk.Lock's", vr.label, us(h) + " µs", us(ph) + " µs", h <= ph, true})
		}
	}

}

// manyTargets are the targets of the many-locks cell on Redis.
func (r *report) manyTargets(ts *targetList) {
	add := ts.add
	found := false
	for _, mr := range r.many {
		if mr.sys.server != "redis" || mr.sys.kind != kindLocker || mr.err != nil {
			continue
		}
		found = true
		label := strings.TrimPrefix(mr.sys.name, "locker ")
		if label == "locker" {
			label = "1 Client"
		}
		add(target{"Redis, many locks", fmt.Sprintf("%d held locks: round trips per 100 locks per renewal period ≤ 1", mr.n), label, fmt.Sprintf("%.2f", mr.tripsPer100Per), "1", mr.tripsPer100Per <= 1, true})
		add(target{"Redis, many locks", "front-end memory per held lock ≤ 2 KB", label, fmt.Sprintf("%.2f KB (whole client heap)", float64(mr.heapPerLock)/1024), "2 KB", mr.heapPerLock <= 2048, true})
	}
	if !found {
		add(unmeasured("Redis, many locks", "many-locks cell"))
	}
}

// newMutexTargets compare, on one key and one driver, the handles made
// with locker.NewMutex to the same handles made from one Client (issue
// 29): throughput, and on Redis round trips and commands per acquisition.
func (r *report) newMutexTargets(ts *targetList) {
	add := ts.add
	for _, srv := range []string{"redis", "etcd", "zk"} {
		area := map[string]string{"redis": "Redis", "etcd": "etcd", "zk": "ZooKeeper"}[srv]
		viaNew, viaClient := r.find(srv, "locker NewMutex 1 driver"), r.find(srv, "locker 1 driver")
		for _, n := range r.cfg.ns {
			what := fmt.Sprintf("N=%d on one driver: NewMutex handles' acquisitions/s ≥ 0.8× one Client's handles'", n)
			r.ratioTarget(ts, area, what, "NewMutex", viaNew, viaClient, 0.8, r.conStat(n, func(s contendedStats) float64 { return s.rate }))
			if srv != "redis" {
				continue
			}
			c := r.contended(viaNew, n)
			if c == nil {
				continue
			}
			st := c.stats()
			add(target{area, fmt.Sprintf("N=%d on one driver: NewMutex handles' round trips per acquisition ≤ 3.5", n), "NewMutex", fmt.Sprintf("%.2f", st.tripsPerAcq), "3.5", st.tripsPerAcq <= 3.5, true})
			add(target{area, fmt.Sprintf("N=%d on one driver: NewMutex handles' server commands per acquisition ≤ 12", n), "NewMutex", fmt.Sprintf("%.1f", st.cmdsPerAcq), "12", st.cmdsPerAcq <= 12, true})
		}
	}
}

func (r *report) writeTargets(w io.Writer) {
	ts := r.targets()
	fmt.Fprintf(w, "### Targets (issues 6 and 18): locker against the best peer in this run\n\n")
	var rows [][]string
	for _, t := range ts {
		verdict := "not measured in this run"
		if t.measured {
			verdict = "met"
			if !t.met {
				verdict = "**missed**"
			}
		}
		rows = append(rows, []string{t.area, t.what, t.variant, t.got, t.bar, verdict})
	}
	fmt.Fprintf(w, "Contended targets are evaluated for locker with 4 drivers (goroutines spread over 4 clients, as over 4 processes: the peers run the same way) and with 1 driver (all goroutines in one process, where locker lines waiters up in-process).\n\n")
	table(w, "llllll", []string{"area", "target", "locker variant", "locker", "bar", "verdict"}, rows)
}
