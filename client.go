package locker

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
)

// A Client is the lock service of one driver in this process: it owns the
// state that the locks of that driver share, and their lifecycle.
//
//   - In-process lines: lock calls for the same key through a Client line up
//     first come, first served, and only the head of the line talks to the
//     backend (see "Waiting and fairness" in the package documentation).
//   - One watchdog: a single timer renews every hold of the Client, in
//     batches where the driver can (driver.BatchRefresher).
//   - Background cleanup: what an abandoned lock call may have left on the
//     backend is removed after the call has returned; later lock calls for
//     the key through the Client wait for it.
//   - Defaults: the options given to New apply to every handle made from
//     the Client, before the handle's own options.
//
// Close releases every hold the Client granted and ends its background
// work; later calls fail with ErrClosed. A Client is safe for concurrent
// use; make one per driver with New and share it. The zero Client has no
// driver: Close and the lock calls of its handles fail with an error
// wrapping ErrZeroValue (the sync forms panic with it).
type Client struct {
	drv driver.Driver
	// The optional parts of d that its Capabilities report, read once by
	// New: a nil interface, or false, is a part the driver lacks.
	notifier driver.Notifier
	batcher  driver.BatchRefresher
	acquirer driver.Acquirer
	watcher  driver.LossWatcher
	inspect  driver.Inspector
	queue    bool // Request.Queued
	shared   bool
	counted  bool
	values   bool
	refusal  error    // wrapped by the refusals of what the driver lacks
	opts     []Option // the client-wide defaults, applied before a handle's own

	// ctx is cancelled by Close: lock calls waiting for a key, renewals
	// and blocking driver calls made for the Client end with it.
	ctx    context.Context
	cancel context.CancelFunc

	// bg counts the goroutines of Election.Observe and LeaderLatch; Close
	// waits for them.
	bg sync.WaitGroup

	mu     sync.Mutex
	closed bool
	idle   chan struct{} // made by Close; closed when no gate is left
	gates  map[string]*gate
	wd     watchdog
	// kept counts the leases kept for their minimum hold (releaseAt);
	// keptDone, made by keptIdle, is closed when it falls to 0.
	kept     int
	keptDone chan struct{}

	// hedge is the deadline the first Release calls of releases without
	// one of their own share (see hedgeWindow).
	hedge atomic.Pointer[hedgeContext]

	// errs is the default error handler of the Client's handles.
	errs errorLog

	// dflt is set on the default Clients of NewMutex and its kin
	// (shared.go), nil on the Clients of New.
	dflt *defaultEntry
}

// New returns a Client for the driver d. It does no I/O, and the Client
// starts no goroutine until a lock is held. Options given here are the
// defaults of every handle made from the Client; a bad option, like a nil
// driver, is reported by the first lock call (ErrInvalidOption,
// ErrInvalidTTL, ErrNilDriver).
//
// The Client does not own d, nor the backend client inside it: closing the
// Client leaves them open, and closing them first makes the Client's calls
// fail with the driver's permanent error.
func New(d driver.Driver, opts ...Option) *Client {
	c := &Client{drv: d, opts: opts, gates: make(map[string]*gate)}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.discover(d)
	c.wd.c = c
	return c
}

// discover reads the optional parts of d from its Capabilities. An
// interface is used only where the Capabilities report it, so that a
// driver that wraps others may implement every method and say which work.
func (c *Client) discover(d driver.Driver) {
	caps := driver.CapabilitiesOf(d)
	if caps.Notify {
		c.notifier, _ = d.(driver.Notifier)
	}
	if caps.RefreshBatch {
		c.batcher, _ = d.(driver.BatchRefresher)
	}
	if caps.Acquire {
		c.acquirer, _ = d.(driver.Acquirer)
	}
	if caps.WatchLoss {
		c.watcher, _ = d.(driver.LossWatcher)
	}
	if caps.Inspect {
		c.inspect, _ = d.(driver.Inspector)
	}
	c.queue = caps.Queue
	c.shared = caps.Shared
	c.counted = caps.Shared && caps.Counted
	c.values = caps.Values
	c.refusal = cmp.Or(caps.Unsupported, errors.ErrUnsupported)
}

// Driver returns the driver c was made with.
func (c *Client) Driver() driver.Driver {
	if c == nil {
		return nil
	}
	return c.drv
}

// Mutex returns a Mutex for key. It does no I/O: a bad key or option is
// reported by the first lock call. opts apply after the Client's defaults.
func (c *Client) Mutex(key string, opts ...Option) *Mutex {
	m := &Mutex{}
	m.init(c.orZero(), key, opts)
	return m
}

// RWMutex returns an RWMutex for key, as Mutex does.
func (c *Client) RWMutex(key string, opts ...Option) *RWMutex {
	rw := &RWMutex{}
	rw.init(c.orZero(), key, opts)
	return rw
}

// ReentrantMutex returns a ReentrantMutex for key, as Mutex does. All
// ReentrantMutex handles of c for one key share holds: a context returned
// by one enters the hold through the others.
func (c *Client) ReentrantMutex(key string, opts ...Option) *ReentrantMutex {
	return &ReentrantMutex{c: c.orZero(), key: key, cfg: c.config(opts)}
}

// orZero returns c, or a zero Client for a nil c, so that the handles of a
// nil Client report a zero Client rather than a zero handle.
func (c *Client) orZero() *Client {
	if c == nil {
		return new(Client)
	}
	return c
}

// config returns the configuration of a handle made with opts.
func (c *Client) config(opts []Option) config {
	if c == nil || len(c.opts) == 0 { // a nil Client's handles fail with ErrZeroValue
		return newConfig(opts)
	}
	all := make([]Option, 0, len(c.opts)+len(opts))
	return newConfig(append(append(all, c.opts...), opts...))
}

// Close shuts c down. It makes later lock calls through c fail with an
// error wrapping ErrClosed, ends the lock calls that are waiting with that
// error, and ends every hold c granted: their Done channels close, their
// Err reports ErrClosed, and their leases are released on the backend,
// concurrently. It then waits for c's background work (cleanups, renewals
// on their way) to end. A lease kept for a minimum hold (WithMinHold) that
// has not passed, a hold's that Close ends or one released earlier, is
// released when the minimum hold ends, and Close waits for that: for the
// remainder of the minimum hold, not for the TTL, so that a process that
// exits after Close leaves no key held longer than its minimum hold.
//
// Close returns by ctx's deadline: what is not done by then goes on in
// the background (a lease not released expires after its TTL, or, if the
// process lives on, is released at the end of its minimum hold) and Close
// returns ctx's error. Otherwise it returns the errors of the releases
// that failed, joined, or nil. Calling Close again waits for the
// background work again. Handles of a closed Client still need their
// Unlock calls, which then report ErrClosed instead of panicking.
func (c *Client) Close(ctx context.Context) error {
	if c.isZero() {
		return zeroError("close", kindClient)
	}
	if ctx == nil {
		return opError("close", "", ErrNilContext)
	}
	c.mu.Lock()
	first := !c.closed
	if first {
		c.closed = true
		c.idle = make(chan struct{})
		c.closeIfIdleLocked()
	}
	idle := c.idle
	c.mu.Unlock()
	var errs []error
	if first {
		c.cancel()
		errs = c.releaseAll(ctx, c.wd.close())
	}
	flights := c.wd.flightsDone()
	observers := make(chan struct{})
	go func() {
		c.bg.Wait() // they end with c.ctx, cancelled above
		close(observers)
	}()
	for _, ch := range []<-chan struct{}{idle, flights, observers, c.keptIdle()} {
		select {
		case <-ch:
		case <-ctx.Done():
			return opError("close", "", ctx.Err())
		}
	}
	return errors.Join(errs...)
}

// releaseAll ends holds as closed and releases their leases concurrently.
func (c *Client) releaseAll(ctx context.Context, holds []*Hold) []error {
	errs := make([]error, len(holds))
	var wg sync.WaitGroup
	for i, h := range holds {
		h.end(stateClosed, ErrClosed)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := cleanupContext(ctx, h.ttl)
			defer cancel()
			if until, ok := h.keepLease(rctx, "close"); ok {
				// WithMinHold: Close does not shorten it, and
				// waits for its release (keptIdle).
				c.releaseAt(h.lease, h.ttl, until, h.cfg)
				return
			}
			if err := c.releaseHedged(rctx, h.lease, h.ttl); err != nil && !errors.Is(err, driver.ErrNotHeld) {
				errs[i] = opError("close", h.lease.Key, err)
			}
		}()
	}
	wg.Wait()
	return errs
}

// closeIfIdleLocked signals Close when no gate is left. c.mu is held.
func (c *Client) closeIfIdleLocked() {
	if c.idle != nil && len(c.gates) == 0 {
		select {
		case <-c.idle:
		default:
			close(c.idle)
		}
	}
}

// cleanUp releases l (releaseHedged), and again after a backoff while the
// outcome is not known (the backend did not answer, a connection broke),
// until ctx ends:
// a release by the owner is safe to repeat. One try is not enough: a wait
// queue entry left behind would block the key until its TTL.
func (c *Client) cleanUp(ctx context.Context, l driver.Lease) error {
	bo := driverkit.Backoff{Min: 20 * time.Millisecond, Max: time.Second}
	ttl := l.TTL // a hold's; a queue entry's lease is bounded by ctx
	if dl, ok := ctx.Deadline(); ttl <= 0 && ok {
		ttl = time.Until(dl)
	}
	for {
		err := c.releaseHedged(ctx, l, ttl)
		if settles(err) || bo.Wait(ctx) != nil {
			return err
		}
	}
}

// cleanupLater removes what l.Owner may have on the backend (a grant whose
// reply was lost, a wait-queue entry), in the background, on a fresh
// context bounded by the TTL. Until it is done, lock calls for l.Key
// through c wait before they take their place in the key's line, and
// Close waits for it.
func (c *Client) cleanupLater(g *gate, l driver.Lease, ttl time.Duration, cfg *config) {
	c.pin() // a default Client stays while the cleanup runs
	c.mu.Lock()
	g.refs++
	g.cleanups++
	if g.cleaned == nil {
		g.cleaned = make(chan struct{})
	}
	c.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupBound(ttl))
		err := c.cleanUp(ctx, l)
		cancel()
		if err != nil && !errors.Is(err, driver.ErrNotHeld) && !driver.IsPermanent(err) {
			c.reportError(cfg, opError("cleanup", l.Key, err))
		}
		c.mu.Lock()
		g.cleanups--
		if g.cleanups == 0 {
			close(g.cleaned)
			g.cleaned = nil
		}
		c.dropGateLocked(g)
		c.mu.Unlock()
		c.unpin()
	}()
}

// A gate lines up the waiters of this process for one key, first come first
// served: exclusive waiters one at a time, shared waiters together. Only
// holders of a gate place talk to the backend, so local waiters for a held
// key do not poll it, and a local releaser that locks again at once queues
// behind them.
//
// On a driver with a wait queue of its own (driver.Acquirer), the gate admits
// two exclusive places: the holder's and the next waiter's, which waits in
// the backend's queue (the backend keeps them apart), so that a local
// handoff is the backend's notification rather than a new request after
// the release.
type gate struct {
	key     string
	writers int // exclusive places taken: at most maxWriters
	readers int
	units   int64 // weight of the counted places among readers
	queue   []*gateWaiter
	refs    int
	// sub is a subscription to key that a head of the line left for the
	// next one, so that successive waiters of this process do not each
	// subscribe anew.
	sub driver.Subscription
	// cleanups counts background cleanups of abandoned lock calls for
	// key (Client.cleanupLater); cleaned is closed when the last ends.
	cleanups int
	cleaned  chan struct{}
}

// maxWriters is how many exclusive places a gate of e admits.
func (c *Client) maxWriters() int {
	if c.acquirer != nil {
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

// admitLocked takes a place in mode m and returns its admission. c.mu is
// held.
func (g *gate) admitLocked(p place) admission {
	g.take(p)
	a := admission{sub: g.sub, contended: p.mode == driver.Exclusive && g.writers > 1}
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
func (c *Client) leaveSub(g *gate, s driver.Subscription) {
	c.mu.Lock()
	if len(g.queue) > 0 && g.sub == nil {
		g.sub = s
		s = nil
	}
	c.mu.Unlock()
	if s != nil {
		_ = s.Close()
	}
}

// A place is what a lock call takes in a gate: its mode and, for a counted
// Shared call (Semaphore), its weight and the limit it counts against.
type place struct {
	mode          driver.Mode
	weight, limit int64
}

type gateWaiter struct {
	place
	ready   chan struct{}
	granted bool
	adm     admission // set when granted
}

// admits reports whether place p is free, given that up to maxWriters
// exclusive places may be taken: counted places only while their weights
// fit in the limit, so that this process does not ask the backend for
// units it holds itself.
func (g *gate) admits(p place, maxWriters int) bool {
	if p.mode == driver.Shared {
		return g.writers == 0 && (p.limit == 0 || g.units+p.weight <= p.limit)
	}
	return g.writers < maxWriters && g.readers == 0
}

func (g *gate) take(p place) {
	if p.mode == driver.Shared {
		g.readers++
		g.units += p.weight
	} else {
		g.writers++
	}
}

// pump grants places to the waiters at the head of the queue.
func (g *gate) pump(maxWriters int) {
	for len(g.queue) > 0 && g.admits(g.queue[0].place, maxWriters) {
		w := g.queue[0]
		g.queue[0] = nil
		g.queue = g.queue[1:]
		w.adm = g.admitLocked(w.place)
		w.granted = true
		close(w.ready)
	}
}

// enter waits for a place in key's gate. With try set it does not wait
// for a place and reports false when it is taken; it still waits for the
// key's background cleanups, which end soon. It fails with ErrClosed once
// c is closed.
func (c *Client) enter(ctx context.Context, key string, p place, try bool) (*gate, admission, bool, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, admission{}, false, ErrClosed
	}
	g := c.gates[key]
	if g == nil {
		g = gatePool.Get().(*gate)
		g.key = key
		c.gates[key] = g
	}
	g.refs++
	for g.cleaned != nil {
		cleaned := g.cleaned
		c.mu.Unlock()
		if err := c.wait(ctx, cleaned); err != nil {
			c.mu.Lock()
			c.dropGateLocked(g)
			c.mu.Unlock()
			return nil, admission{}, false, err
		}
		c.mu.Lock()
	}
	// A try takes a place only if no local holder conflicts: it must
	// not wait in the backend's queue.
	max := c.maxWriters()
	if try {
		max = 1
	}
	if len(g.queue) == 0 && g.admits(p, max) {
		a := g.admitLocked(p)
		c.mu.Unlock()
		a.drainSub()
		return g, a, true, nil
	}
	if try {
		c.dropGateLocked(g)
		c.mu.Unlock()
		return nil, admission{}, false, nil
	}
	w := &gateWaiter{place: p, ready: make(chan struct{})}
	g.queue = append(g.queue, w)
	c.mu.Unlock()

	err := c.wait(ctx, w.ready)
	if err == nil {
		w.adm.drainSub()
		return g, w.adm, true, nil
	}
	c.mu.Lock()
	if w.granted {
		c.mu.Unlock()
		if w.adm.sub != nil {
			c.leaveSub(g, w.adm.sub)
		}
		c.exit(g, p)
		return nil, admission{}, false, err
	}
	for i, q := range g.queue {
		if q == w {
			g.queue = append(g.queue[:i], g.queue[i+1:]...)
			break
		}
	}
	g.pump(c.maxWriters()) // a writer leaving the head may let readers in
	c.dropGateLocked(g)
	c.mu.Unlock()
	return nil, admission{}, false, err
}

// wait waits for ch to close, ctx to end or c to close, and returns nil,
// ctx's error or ErrClosed.
func (c *Client) wait(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.ctx.Done():
		return ErrClosed
	}
}

// exit gives back a place taken by enter.
func (c *Client) exit(g *gate, p place) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.mode == driver.Shared {
		g.readers--
		g.units -= p.weight
	} else {
		g.writers--
	}
	g.pump(c.maxWriters())
	c.dropGateLocked(g)
}

func (c *Client) dropGateLocked(g *gate) {
	g.refs--
	if g.refs == 0 && g.sub != nil {
		_ = g.sub.Close()
		g.sub = nil
	}
	if g.refs == 0 && c.gates[g.key] == g {
		delete(c.gates, g.key)
		*g = gate{queue: g.queue[:0]}
		gatePool.Put(g)
		c.closeIfIdleLocked()
	}
}

var gatePool = sync.Pool{New: func() any { return new(gate) }}
