package main

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// lockHandle is one goroutine's handle on a lock, in any library.
type lockHandle interface {
	Lock(ctx context.Context) error
	Unlock(ctx context.Context) error
}

// instance is a system opened for one cell: its clients, and handles made
// on them.
type instance struct {
	// newLock returns a handle on key that uses client i.
	newLock func(i int, key string) (lockHandle, error)
	close   func()
}

type kind int

const (
	kindLocker kind = iota
	kindPeer
	kindRaw
)

// system is one lock implementation on one server.
type system struct {
	name   string
	server string // "redis", "etcd", "zk", "mem"
	kind   kind
	desc   string
	// clients is how many clients (connections, sessions, drivers: the
	// processes of a real deployment) the parallel and contended cells
	// spread their goroutines over; goroutine i uses client i%clients.
	clients int
	// contendedOnly systems run the contended cells only.
	contendedOnly bool
	// parallelOnly systems run the parallel cell only.
	parallelOnly bool
	// perContender systems also run the contended cells with one client
	// per goroutine (clients = N: N processes, each with one contender),
	// unless -per-contender=false.
	perContender bool
	open         func(e *env, clients int) (*instance, error)
}

func (s *system) label() string { return s.server + " / " + s.name }

// env is the servers of a run and their round-trip counters.
type env struct {
	redis, zk, etcd *server
	nats            *server
	mongo           *server // FerretDB
	trips           map[string]*counter
	rpcs            *rpcCounter // etcd's requests
	zkOps           *opCounter  // ZooKeeper's requests
	cfg             config
}

func (e *env) srv(name string) *server {
	switch name {
	case "redis":
		return e.redis
	case "zk":
		return e.zk
	case "etcd":
		return e.etcd
	case "nats":
		return e.nats
	case "mongo":
		return e.mongo
	}
	return nil
}

// probe is the counters read before and after a measurement.
type probe struct {
	t       time.Time
	mallocs uint64
	bytes   uint64
	cpu     time.Duration
	srvCPU  time.Duration
	trips   int64
	cmds    cmdStats
}

func (e *env) read(server string, gc bool) probe {
	var p probe
	if gc {
		runtime.GC()
	}
	if s := e.srv(server); s != nil {
		switch server {
		case "redis":
			p.cmds, _ = redisCmdStats(s.addr)
		case "etcd":
			p.cmds = e.rpcs.snapshot()
		case "zk":
			p.cmds = e.zkOps.snapshot()
		}
		p.srvCPU = s.cpu()
	}
	if c := e.trips[server]; c != nil {
		p.trips = c.Load()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	p.mallocs, p.bytes = ms.Mallocs, ms.TotalAlloc
	p.cpu = selfCPU()
	p.t = time.Now()
	return p
}

// delta is what happened between two probes.
type delta struct {
	elapsed        time.Duration
	mallocs, bytes uint64
	cpu, srvCPU    time.Duration
	trips          int64
	cmds           cmdStats
}

func (d *delta) add(o delta) {
	d.elapsed += o.elapsed
	d.mallocs += o.mallocs
	d.bytes += o.bytes
	d.cpu += o.cpu
	d.srvCPU += o.srvCPU
	d.trips += o.trips
	if d.cmds == nil {
		d.cmds = cmdStats{}
	}
	for k, v := range o.cmds {
		d.cmds[k] += v
	}
}

func (e *env) since(server string, p probe) delta {
	now := time.Now()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	d := delta{elapsed: now.Sub(p.t), mallocs: ms.Mallocs - p.mallocs, bytes: ms.TotalAlloc - p.bytes, cpu: selfCPU() - p.cpu}
	if c := e.trips[server]; c != nil {
		d.trips = c.Load() - p.trips
	}
	if s := e.srv(server); s != nil {
		d.srvCPU = s.cpu() - p.srvCPU
		switch server {
		case "redis":
			if cs, err := redisCmdStats(s.addr); err == nil {
				d.cmds = cs.sub(p.cmds)
			}
		case "etcd":
			d.cmds = e.rpcs.snapshot().sub(p.cmds)
		case "zk":
			d.cmds = e.zkOps.snapshot().sub(p.cmds)
		}
	}
	return d
}

// keyOf returns a key unique to a system and cell.
func keyOf(s *system, cell string, i int) string {
	return fmt.Sprintf("bench/%s/%s/%s/%d/%d", s.server, s.name, cell, i, time.Now().UnixNano())
}

// uncontendedResult is one goroutine locking and unlocking one key.
type uncontendedResult struct {
	pairs  int
	errors int
	lat    hist
	d      delta
}

// uncontended is a system prepared for the uncontended cell: its client
// and one handle, warmed up.
type uncontended struct {
	s    *system
	inst *instance
	h    lockHandle
	r    uncontendedResult
}

func prepareUncontended(e *env, s *system) (*uncontended, error) {
	inst, err := s.open(e, 1)
	if err != nil {
		return nil, err
	}
	u := &uncontended{s: s, inst: inst}
	if u.h, err = inst.newLock(0, keyOf(s, "u", 0)); err != nil {
		inst.close()
		return nil, err
	}
	ctx := context.Background()
	warm := time.Now().Add(e.cfg.warmup)
	for i := 0; i < 20 || time.Now().Before(warm); i++ {
		if err := u.pair(ctx); err != nil {
			inst.close()
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	return u, nil
}

func (u *uncontended) pair(ctx context.Context) error {
	if err := u.h.Lock(ctx); err != nil {
		return err
	}
	return u.h.Unlock(ctx)
}

// measure locks and unlocks the key in a loop for dur and adds latency,
// round trips, server commands, client allocations and CPU to u.r.
func (u *uncontended) measure(e *env, dur time.Duration) {
	ctx := context.Background()
	r := &u.r
	p := e.read(u.s.server, true)
	end := p.t.Add(dur)
	for {
		t0 := time.Now()
		if t0.After(end) {
			break
		}
		if err := u.pair(ctx); err != nil {
			r.errors++
			continue
		}
		r.lat.add(time.Since(t0))
		r.pairs++
	}
	r.d.add(e.since(u.s.server, p))
}

// parallelResult is G goroutines, each locking its own key.
type parallelResult struct {
	goroutines, pairs, errors int
	lat                       hist
	d                         delta
}

func runParallel(e *env, s *system, g int, dur time.Duration) (*parallelResult, error) {
	inst, err := s.open(e, s.clients)
	if err != nil {
		return nil, err
	}
	defer inst.close()
	hs := make([]lockHandle, g)
	for i := range hs {
		if hs[i], err = inst.newLock(i%s.clients, keyOf(s, "p", i)); err != nil {
			return nil, err
		}
	}
	ctx := context.Background()
	// Warm up every handle's client once.
	for _, h := range hs {
		if err := h.Lock(ctx); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
		if err := h.Unlock(ctx); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	r := &parallelResult{goroutines: g}
	hists := make([]hist, g)
	pairs := make([]int, g)
	errs := make([]int, g)
	var wg sync.WaitGroup
	p := e.read(s.server, true)
	end := p.t.Add(dur)
	for i, h := range hs {
		wg.Go(func() {
			for {
				t0 := time.Now()
				if t0.After(end) {
					return
				}
				if err := h.Lock(ctx); err != nil {
					errs[i]++
					continue
				}
				if err := h.Unlock(ctx); err != nil {
					errs[i]++
					continue
				}
				hists[i].add(time.Since(t0))
				pairs[i]++
			}
		})
	}
	wg.Wait()
	r.d = e.since(s.server, p)
	for i := range hs {
		r.lat.merge(&hists[i])
		r.pairs += pairs[i]
		r.errors += errs[i]
	}
	return r, nil
}

// merge adds the round o, run on the same system, to r.
func (r *parallelResult) merge(o *parallelResult) {
	r.pairs += o.pairs
	r.errors += o.errors
	r.lat.merge(&o.lat)
	r.d.add(o.d)
}

// event is one acquisition in a contended cell, in acquisition order.
type event struct {
	g          int32
	call       int64 // the goroutine's first Lock call for this acquisition
	acquired   int64 // Lock returned
	unlockCall int64
	unlockRet  int64 // written after Unlock returns, by the same goroutine
	cs         int64 // measured critical section
}

// contendedResult is N goroutines on one key with a critical section.
type contendedResult struct {
	n, clients   int
	acquisitions int
	errors       int
	violations   int64 // acquisitions that saw another holder
	maxHolders   int64
	perG         []int
	events       []event
	pendingMax   time.Duration // longest wait still in progress at the end
	d            delta
	// segments are the events of the rounds merged into this result
	// (see merge); nil for a single round, whose events are events.
	segments [][]event
	stCache  *contendedStats
}

// merge adds the round o, run on the same system and N, to r.
func (r *contendedResult) merge(o *contendedResult) {
	if r.segments == nil {
		r.segments = [][]event{r.events}
	}
	r.segments = append(r.segments, o.events)
	r.acquisitions += o.acquisitions
	r.errors += o.errors
	r.violations += o.violations
	r.maxHolders = max(r.maxHolders, o.maxHolders)
	for i := range r.perG {
		r.perG[i] += o.perG[i]
	}
	r.pendingMax = max(r.pendingMax, o.pendingMax)
	r.d.add(o.d)
	r.stCache = nil
}

var inf = math.Inf(1)

// nanotime returns monotonic nanoseconds since the process started.
var epoch = time.Now()

func nanotime() int64 { return int64(time.Since(epoch)) }

// runContended runs n goroutines on one key: each locks, checks that it is
// the only holder, works for cs (not time.Sleep: see work), unlocks, and
// locks again at once.
func runContended(e *env, s *system, n, clients int, cs, dur time.Duration) (*contendedResult, error) {
	inst, err := s.open(e, clients)
	if err != nil {
		return nil, err
	}
	defer inst.close()
	key := keyOf(s, fmt.Sprintf("c%d-%d", n, clients), 0)
	hs := make([]lockHandle, n)
	for i := range hs {
		if hs[i], err = inst.newLock(i%clients, key); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, h := range hs {
		if err := h.Lock(ctx); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
		if err := h.Unlock(ctx); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	return contend(e, s.server, hs, clients, cs, dur)
}

// contend runs the contended loop on handles hs (all on one key).
func contend(e *env, server string, hs []lockHandle, clients int, cs, dur time.Duration) (*contendedResult, error) {
	n := len(hs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// No correct lock grants more than dur/cs acquisitions; a broken one
	// may, and its extra events are not recorded.
	events := make([]event, int(dur/cs)+1024)
	var (
		seq     atomic.Int64
		holders atomic.Int64
		viol    atomic.Int64
		maxH    atomic.Int64
		stop    atomic.Bool
		wg      sync.WaitGroup
	)
	waiting := make([]atomic.Int64, n) // call time of a Lock in progress, 0 if none
	perG := make([]int, n)
	errs := make([]int, n)
	start := make(chan struct{})
	for gi, h := range hs {
		wg.Go(func() {
			<-start
			for !stop.Load() {
				call := nanotime()
				waiting[gi].Store(call)
				var err error
				for {
					if err = h.Lock(ctx); err == nil || stop.Load() {
						break
					}
					errs[gi]++ // a library that gave up: try again, same wait
				}
				acq := nanotime()
				waiting[gi].Store(0)
				if err != nil {
					return // ctx cancelled at the end
				}
				if stop.Load() { // acquired after the end: not counted
					_ = h.Unlock(context.Background())
					return
				}
				hn := holders.Add(1)
				if hn > 1 {
					viol.Add(1)
				}
				for m := maxH.Load(); hn > m && !maxH.CompareAndSwap(m, hn); m = maxH.Load() {
				}
				idx := seq.Add(1) - 1
				c0 := nanotime()
				work(cs)
				c1 := nanotime()
				holders.Add(-1)
				perG[gi]++
				var ev *event
				if idx < int64(len(events)) {
					ev = &events[idx]
					*ev = event{g: int32(gi), call: call, acquired: acq, cs: c1 - c0}
				}
				uc := nanotime()
				if ev != nil {
					ev.unlockCall = uc
				}
				if err := h.Unlock(context.Background()); err != nil {
					errs[gi]++
				}
				if ev != nil {
					ev.unlockRet = nanotime()
				}
			}
		})
	}
	p := e.read(server, true)
	close(start)
	time.Sleep(dur)
	stop.Store(true)
	endT := nanotime()
	d := e.since(server, p)
	r := &contendedResult{n: n, clients: clients, perG: perG, d: d}
	for i := range waiting {
		if c := waiting[i].Load(); c != 0 {
			r.pendingMax = max(r.pendingMax, time.Duration(endT-c))
		}
	}
	// Let the goroutines finish their current hold; waiters still in
	// Lock are cancelled (libraries that ignore ctx get the lock once the
	// others have stopped).
	time.AfterFunc(50*time.Millisecond, cancel)
	wg.Wait()
	r.acquisitions = int(seq.Load())
	r.events = events[:min(r.acquisitions, len(events))]
	r.violations, r.maxHolders = viol.Load(), maxH.Load()
	for _, x := range errs {
		r.errors += x
	}
	return r, nil
}

// contendedStats is what the tables show of a contended cell.
type contendedStats struct {
	rate                          float64 // acquisitions per second
	handoff, cross, crossCall     hist
	negative                      int // next Lock returned before the previous Unlock did
	wait, cs                      hist
	selfShare                     float64
	fairness                      float64 // max/min acquisitions per goroutine; +Inf if one starved
	minG, maxG                    int
	tripsPerAcq, cmdsPerAcq       float64
	cpuPerAcq, srvCPUPerAcq       time.Duration
	maxWait                       time.Duration
	handoffs, crossN, selfHandoff int
}

func (r *contendedResult) stats() contendedStats {
	if r.stCache != nil {
		return *r.stCache
	}
	var st contendedStats
	st.rate = float64(r.acquisitions) / r.d.elapsed.Seconds()
	segs := r.segments
	if segs == nil {
		segs = [][]event{r.events}
	}
	for _, evs := range segs {
		st.addEvents(evs)
	}
	if st.handoffs > 0 {
		st.selfShare = float64(st.selfHandoff) / float64(st.handoffs)
	}
	st.minG, st.maxG = r.perG[0], r.perG[0]
	for _, c := range r.perG {
		st.minG, st.maxG = min(st.minG, c), max(st.maxG, c)
	}
	st.fairness = inf
	if st.minG > 0 {
		st.fairness = float64(st.maxG) / float64(st.minG)
	}
	st.maxWait = max(st.wait.max, r.pendingMax)
	if r.acquisitions > 0 {
		a := float64(r.acquisitions)
		st.tripsPerAcq = float64(r.d.trips) / a
		st.cmdsPerAcq = float64(r.d.cmds.total()) / a
		st.cpuPerAcq = r.d.cpu / time.Duration(r.acquisitions)
		st.srvCPUPerAcq = r.d.srvCPU / time.Duration(r.acquisitions)
	}
	r.stCache = &st
	return st
}

// addEvents adds the waits, critical sections and handoffs of one round's
// events, in acquisition order.
func (st *contendedStats) addEvents(evs []event) {
	for i := range evs {
		st.wait.add(time.Duration(evs[i].acquired - evs[i].call))
		st.cs.add(time.Duration(evs[i].cs))
		if i == 0 {
			continue
		}
		prev, cur := &evs[i-1], &evs[i]
		ho := cur.acquired - prev.unlockRet
		if prev.unlockRet == 0 { // unlock still running at the end
			continue
		}
		st.handoffs++
		if ho < 0 {
			st.negative++
		}
		st.handoff.add(time.Duration(ho))
		if cur.g == prev.g {
			st.selfHandoff++
			continue
		}
		st.crossN++
		st.cross.add(time.Duration(ho))
		st.crossCall.add(time.Duration(cur.acquired - prev.unlockCall))
	}
}
