package locker

import (
	"context"
	"reflect"
	"sync"

	"github.com/go-locker/locker/driver"
)

// An engine is the per-driver state shared by every handle in the process:
// the in-process gates that line up local waiters per key, and the
// watchdog that renews the driver's leases. Engines live in a registry
// keyed by the driver value while any lock call or hold uses them; up to
// maxIdleEngines unused ones are kept for reuse, so that a lock+unlock
// loop does not build one each time.
type engine struct {
	drv       driver.Driver
	notifier  driver.Notifier
	queuer    driver.Queuer
	batcher   driver.BatchRefresher
	acquirer  driver.Acquirer
	watcher   driver.LossWatcher
	shared    bool
	shareable bool // registered: other handles of the same driver share it

	mu    sync.Mutex
	refs  int
	gates map[string]*gate
	wd    watchdog
}

const maxIdleEngines = 64

var registry struct {
	sync.Mutex
	m    map[driver.Driver]*engine
	idle int // engines in m with refs == 0
}

func newEngine(d driver.Driver) *engine {
	e := &engine{drv: d, gates: make(map[string]*gate)}
	e.notifier, _ = d.(driver.Notifier)
	e.queuer, _ = d.(driver.Queuer)
	e.batcher, _ = d.(driver.BatchRefresher)
	e.acquirer, _ = d.(driver.Acquirer)
	e.watcher, _ = d.(driver.LossWatcher)
	if s, ok := d.(driver.Sharer); ok {
		e.shared = s.SupportsShared()
	}
	e.wd.eng = e
	return e
}

// engineFor returns the engine of d with one more reference; drop it with
// e.unref. A driver whose dynamic type is not comparable cannot be a map
// key: it gets an engine of its own per call, so its waiters are not
// coalesced within the process.
func engineFor(d driver.Driver) *engine {
	if !comparableDriver(d) {
		e := newEngine(d)
		e.refs = 1
		return e
	}
	registry.Lock()
	defer registry.Unlock()
	e := registry.m[d]
	if e != nil && e.refs == 0 {
		registry.idle--
	}
	if e == nil {
		if registry.m == nil {
			registry.m = make(map[driver.Driver]*engine)
		}
		e = newEngine(d)
		e.shareable = true
		registry.m[d] = e
	}
	e.refs++
	return e
}

func (e *engine) unref() {
	if !e.shareable {
		return
	}
	registry.Lock()
	defer registry.Unlock()
	e.refs--
	if e.refs > 0 {
		return
	}
	registry.idle++
	if registry.idle > maxIdleEngines {
		for d, idle := range registry.m {
			if idle.refs == 0 {
				delete(registry.m, d)
			}
		}
		registry.idle = 0
	}
}

// A gate lines up the waiters of this process for one key, first come first
// served: exclusive waiters one at a time, shared waiters together. Only
// holders of a gate place talk to the backend, so local waiters for a held
// key do not poll it, and a local releaser that locks again at once queues
// behind them.
//
// On a driver with a native wait queue (driver.Acquirer), the gate admits
// two exclusive places: the holder's and the next waiter's, which waits in
// the backend's queue (the backend keeps them apart), so that a local
// handoff is the backend's notification rather than a new request after
// the release.
type gate struct {
	key     string
	writers int // exclusive places taken: at most maxWriters
	readers int
	queue   []*gateWaiter
	refs    int
	// sub is a subscription to key that a head of the line left for the
	// next one, so that successive waiters of this process do not each
	// subscribe anew.
	sub driver.Subscription
}

// maxWriters is how many exclusive places a gate of e admits.
func (e *engine) maxWriters() int {
	if e.acquirer != nil {
		return 2
	}
	return 1
}

// An admission is what a goroutine learns when it takes a place in a gate.
type admission struct {
	// sub is the subscription a previous head of the line left in the
	// gate, with no stale notification pending (its new owner attempts
	// before it waits), or nil.
	sub driver.Subscription
	// contended reports that another goroutine of this process holds an
	// exclusive place besides this exclusive one (see gate).
	contended bool
}

// admitLocked takes a place in mode m and returns its admission. e.mu is
// held.
func (g *gate) admitLocked(m driver.Mode) admission {
	g.take(m)
	a := admission{sub: g.sub, contended: m == driver.Exclusive && g.writers > 1}
	g.sub = nil
	return a
}

// drainSub empties the channel of a.sub.
func (a admission) drainSub() {
	if a.sub == nil {
		return
	}
	for {
		select {
		case <-a.sub.C():
		default:
			return
		}
	}
}

// leaveSub leaves s in g for the next waiter of the line, or closes it
// when no one waits behind.
func (e *engine) leaveSub(g *gate, s driver.Subscription) {
	e.mu.Lock()
	if len(g.queue) > 0 && g.sub == nil {
		g.sub = s
		s = nil
	}
	e.mu.Unlock()
	if s != nil {
		_ = s.Close()
	}
}

type gateWaiter struct {
	mode    driver.Mode
	ready   chan struct{}
	granted bool
	adm     admission // set when granted
}

// admits reports whether a place in mode m is free, given that up to
// maxWriters exclusive places may be taken.
func (g *gate) admits(m driver.Mode, maxWriters int) bool {
	if m == driver.Shared {
		return g.writers == 0
	}
	return g.writers < maxWriters && g.readers == 0
}

func (g *gate) take(m driver.Mode) {
	if m == driver.Shared {
		g.readers++
	} else {
		g.writers++
	}
}

// pump grants places to the waiters at the head of the queue.
func (g *gate) pump(maxWriters int) {
	for len(g.queue) > 0 && g.admits(g.queue[0].mode, maxWriters) {
		w := g.queue[0]
		g.queue[0] = nil
		g.queue = g.queue[1:]
		w.adm = g.admitLocked(w.mode)
		w.granted = true
		close(w.ready)
	}
}

// enter waits for a place in key's gate. With try set it does not wait and
// reports false when the place is taken.
func (e *engine) enter(ctx context.Context, key string, m driver.Mode, try bool) (*gate, admission, bool, error) {
	e.mu.Lock()
	g := e.gates[key]
	if g == nil {
		g = gatePool.Get().(*gate)
		g.key = key
		e.gates[key] = g
	}
	g.refs++
	// A try takes a place only if no local holder conflicts: it must
	// not wait in the backend's queue.
	max := e.maxWriters()
	if try {
		max = 1
	}
	if len(g.queue) == 0 && g.admits(m, max) {
		a := g.admitLocked(m)
		e.mu.Unlock()
		a.drainSub()
		return g, a, true, nil
	}
	if try {
		e.dropGateLocked(g)
		e.mu.Unlock()
		return nil, admission{}, false, nil
	}
	w := &gateWaiter{mode: m, ready: make(chan struct{})}
	g.queue = append(g.queue, w)
	e.mu.Unlock()

	select {
	case <-w.ready:
		w.adm.drainSub()
		return g, w.adm, true, nil
	case <-ctx.Done():
	}
	e.mu.Lock()
	if w.granted {
		e.mu.Unlock()
		if w.adm.sub != nil {
			e.leaveSub(g, w.adm.sub)
		}
		e.exit(g, m)
		return nil, admission{}, false, ctx.Err()
	}
	for i, q := range g.queue {
		if q == w {
			g.queue = append(g.queue[:i], g.queue[i+1:]...)
			break
		}
	}
	g.pump(e.maxWriters()) // a writer leaving the head may let readers in
	e.dropGateLocked(g)
	e.mu.Unlock()
	return nil, admission{}, false, ctx.Err()
}

// exit gives back a place taken by enter.
func (e *engine) exit(g *gate, m driver.Mode) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if m == driver.Shared {
		g.readers--
	} else {
		g.writers--
	}
	g.pump(e.maxWriters())
	e.dropGateLocked(g)
}

func (e *engine) dropGateLocked(g *gate) {
	g.refs--
	if g.refs == 0 && g.sub != nil {
		_ = g.sub.Close()
		g.sub = nil
	}
	if g.refs == 0 && e.gates[g.key] == g {
		delete(e.gates, g.key)
		*g = gate{queue: g.queue[:0]}
		gatePool.Put(g)
	}
}

var gatePool = sync.Pool{New: func() any { return new(gate) }}

// comparableDriver reports whether d can be a map key.
func comparableDriver(d driver.Driver) bool { return reflect.TypeOf(d).Comparable() }
