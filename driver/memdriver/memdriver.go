package memdriver

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
)

// The TTLs the driver accepts, reported by [Driver.Capabilities].
const (
	// MinTTL is the shortest TTL the driver accepts.
	MinTTL = time.Millisecond
	// MaxTTL is the longest TTL the driver accepts: 365 days.
	MaxTTL = 365 * 24 * time.Hour
)

var (
	// ErrInjected is the error that [Driver.FailNext] injects when it is
	// given a nil error.
	ErrInjected = errors.New("injected failure")
	// ErrReplyLost is wrapped by the errors of calls whose reply
	// [Driver.LoseReplies] dropped: the call was applied to the backend,
	// but its caller cannot know it.
	ErrReplyLost = errors.New("reply lost (the operation was applied)")
)

var (
	_ driver.Driver         = (*Driver)(nil)
	_ driver.Describer      = (*Driver)(nil)
	_ driver.Notifier       = (*Driver)(nil)
	_ driver.BatchRefresher = (*Driver)(nil)
	_ driver.Acquirer       = (*Driver)(nil)
	_ driver.LossWatcher    = (*Driver)(nil)
)

// Driver is a client of a [Backend]: it implements [driver.Driver] and all
// the optional parts of the contract on that backend's lock state, and it has
// fault hooks of its own ([Driver.FailNext], [Driver.LoseReplies],
// [Driver.Block]). Create one with [Backend.Driver] or [New]. A Driver is
// safe for concurrent use.
type Driver struct {
	b *Backend

	mu      sync.Mutex
	failN   int
	failErr error
	loseN   int
	// unblock is non-nil while the driver is blocked; Unblock closes it.
	unblock chan struct{}
	// closed is done once Close is called.
	closed context.Context
	close  context.CancelFunc
	errs   driverkit.Errors // names the errors of d's calls
}

// New returns a client of a new, empty backend: it is short for
// NewBackend().Driver(). The backend is reachable with [Driver.Backend],
// and more clients of it with d.Backend().Driver().
func New() *Driver {
	return NewBackend().Driver()
}

// Close closes d, as closing the network client of a real backend would:
// every later call of d (but WatchLoss, Subscription.Close and
// Capabilities) fails at once with an error wrapping [driver.ErrClosed] that
// [driver.IsPermanent] reports as permanent, and the calls under way that
// wait (Block, Acquire in the queue) end with it. The backend and its
// other clients are not affected; the holds of d expire on their own.
// Close is idempotent and returns nil.
func (d *Driver) Close() error {
	d.close()
	return nil
}

// Backend returns the backend d is a client of.
func (d *Driver) Backend() *Backend { return d.b }

// FailNext makes the next n calls of d that get past [Driver.Block] fail
// with err, wrapped, without reaching the backend: they change nothing and
// are not counted in [Backend.Stats]. It models requests that never reached
// the server, such as refused connections. A nil err stands for
// [ErrInjected]; wrap err with [driver.Permanent] to model a failure that
// retrying cannot cure. Each call of d but WatchLoss, Subscription.Close
// and Capabilities consumes one failure; a RefreshBatch consumes
// one for the whole batch. FailNext replaces the failures still pending; n <= 0
// cancels them.
func (d *Driver) FailNext(n int, err error) {
	if err == nil {
		err = ErrInjected
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failN = max(n, 0)
	d.failErr = err
}

// LoseReplies makes the next n state-changing calls of d (TryAcquire,
// queued or not, Acquire, Refresh, RefreshBatch and Release, whatever
// their outcome) take effect on the backend but return an error wrapping
// [ErrReplyLost] instead of their result, as when a network fails after
// the server has applied a request: an Acquire whose reply is lost leaves
// its grant on the backend, as a real network failure would. Calls stopped
// by [Driver.FailNext] do not consume lost replies; a RefreshBatch consumes one for the whole batch,
// and each of its leases then gets the error. LoseReplies replaces the lost
// replies still pending; n <= 0 cancels them.
func (d *Driver) LoseReplies(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.loseN = max(n, 0)
}

// Block cuts d off from its backend, as a network partition that drops
// packets would: from now until [Driver.Unblock], every call of d (but
// WatchLoss, Subscription.Close and Capabilities) waits,
// without reaching the backend, until Unblock is called or its context is
// done; in the latter case it returns the context's error, wrapped. Calls
// that have already reached the backend are not affected (an Acquire
// already waiting in the queue goes on waiting, and may be granted), nor
// are other drivers of the same backend, nor the delivery of notifications
// to existing subscriptions and of loss reports to existing watches.
// Blocking a blocked driver does nothing.
func (d *Driver) Block() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.unblock == nil {
		d.unblock = make(chan struct{})
	}
}

// Unblock ends [Driver.Block]: the calls that were waiting proceed. It does
// nothing if d is not blocked.
func (d *Driver) Unblock() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.unblock != nil {
		close(d.unblock)
		d.unblock = nil
	}
}

// begin runs the fault hooks that come before a call reaches the backend:
// the context check, Block and FailNext. It returns the error that stops
// the call, unwrapped.
func (d *Driver) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d.isClosed() {
		return driver.ErrClosed
	}
	d.mu.Lock()
	ch := d.unblock
	d.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-d.closed.Done():
			return driver.ErrClosed
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failN > 0 {
		d.failN--
		return d.failErr
	}
	return nil
}

func (d *Driver) isClosed() bool { return d.closed.Err() != nil }

// replyLost consumes a pending lost reply, if any, and reports whether it
// did.
func (d *Driver) replyLost() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.loseN > 0 {
		d.loseN--
		return true
	}
	return false
}

// TryAcquire implements [driver.Driver]. It grants req.Key to req.Owner if
// no other owner holds it in a conflicting mode and, while the key's wait
// queue has live entries, if req.Owner is allowed by the queue (see
// "Queued requests" below); the grant gets the key's next fencing token.
// If req.Owner already holds the key in req.Mode, it extends the hold to
// req.TTL from now and returns the same token. Otherwise it returns an
// error wrapping a *[driver.LockedError] whose Remaining is the time until
// everything that stands in the way expires, were nobody to renew it: the
// conflicting holds and, while the queue bars req.Owner, the queue entries
// ahead of it (all of them, when req.Owner is not queued). A TryAcquire
// without req.Queued never joins nor renews a queue entry.
//
// # Queued requests
//
// With req.Queued ([driver.Request].Queued) it is the attempt of a caller
// that has already waited: when the key cannot be granted, it also records
// req.Owner at the tail of the key's wait queue, or renews its entry where
// it already is, so that the entry lasts req.TTL from now.
//
// While the wait queue has live entries, the key is granted, queued or
// not, only to the owner at the head of the queue or, in Mode Shared, to a
// shared owner all of whose predecessors in the queue are shared; an owner
// that is granted the key leaves the queue, and so does one that calls
// Release. Entries that are not renewed expire, so the queue of a crashed
// waiter frees itself. Every removal from the queue wakes the key's
// subscribers.
//
// # Token floors
//
// With req.MinToken ([driver.Request].MinToken) it grants nothing: it
// raises the key's fence counter to req.MinToken, so that the next grant's
// token is greater, and, when req.Owner holds req.Key in req.Mode with a
// lower token, makes req.MinToken that hold's token. The counter is never
// lowered. When req.Owner does not hold the key it returns an error
// wrapping [driver.ErrNotHeld] and changes nothing. The fault hooks apply
// as to [Driver.Refresh]; the call is not counted in [Backend.Stats].
func (d *Driver) TryAcquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	switch {
	case req.MinToken != 0:
		return d.raiseTokenFloor(ctx, req)
	case req.Queued:
		return d.acquire(ctx, "try-acquire-queued", req)
	}
	return d.acquire(ctx, "try-acquire", req)
}

func (d *Driver) acquire(ctx context.Context, op string, req driver.Request) (driver.Lease, error) {
	if err := d.begin(ctx); err != nil {
		return driver.Lease{}, d.errs.Wrap(ctx, op, req.Key, err)
	}
	l, err := d.b.acquire(op, req, req.Queued)
	if d.replyLost() {
		return driver.Lease{}, d.errs.Wrap(ctx, op, req.Key, ErrReplyLost)
	}
	return l, err
}

// Acquire implements [driver.Acquirer]: it waits in the key's wait queue
// (the one of queued requests, see [Driver.TryAcquire]) until req.Key is granted to
// req.Owner or ctx is done.
//
// It first makes the attempt a queued [Driver.TryAcquire] would; if the key
// cannot be granted, req.Owner joins the tail of the queue (or keeps its
// place, if already queued), with an entry that does not expire while
// Acquire waits, so that owners are granted the key in the order in which
// they joined, a run of shared owners at the head together. Between
// attempts it sleeps, without polling, until the key's state changes
// (a release, an entry leaving the queue, [Backend.Expire],
// [Backend.Revoke]) or until the earliest time a hold or entry of the key
// runs out, which nobody announces. The grant gets the key's next fencing
// token, and the lease lasts req.TTL from the grant.
//
// When ctx is done first, Acquire removes req.Owner's queue entry, waking
// the key's other waiters, and returns an error wrapping ctx.Err(): it
// leaves nothing held or queued. If req.Owner already holds the key in
// req.Mode, Acquire extends the hold as TryAcquire would; if it holds it in
// the other mode, Acquire fails at once with an error wrapping
// [driver.ErrLocked].
//
// The fault hooks apply to the start of the call: Block delays it (a
// done ctx still ends it), FailNext fails it before it joins the queue,
// and LoseReplies drops the reply of a call that was granted or gave up.
// Acquire runs in the caller's goroutine and starts none.
func (d *Driver) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	const op = "acquire"
	if err := d.begin(ctx); err != nil {
		return driver.Lease{}, d.errs.Wrap(ctx, op, req.Key, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(d.closed, cancel)
	defer stop()
	l, err := d.b.wait(ctx, op, req)
	if err != nil && d.isClosed() {
		return driver.Lease{}, d.errs.Wrap(ctx, op, req.Key, driver.ErrClosed)
	}
	if d.replyLost() {
		return driver.Lease{}, d.errs.Wrap(ctx, op, req.Key, ErrReplyLost)
	}
	return l, err
}

// WatchLoss implements [driver.LossWatcher]. It arranges for lost to be
// called, at most once, when the backend drops the hold l designates (by
// owner, mode and token) other than by its owner's
// Release: when [Backend.Expire] or [Backend.Revoke] ends it, or when an
// operation on the key finds that its TTL has run out. As the backend has
// no timers, an expiry is noticed only when something touches the key
// (any call or inspection, [Backend.Holders] included), not at the moment
// the TTL runs out. If l is not held when WatchLoss is called, lost is
// called at once. The error passed to lost wraps [driver.ErrNotHeld] and
// says why the hold ended.
//
// lost is called from a goroutine of its own, never with the backend's
// lock held, so it may call the driver. stop removes the registration; once
// it returns, lost is not called (stop waits for a call of lost under way,
// so lost must not call stop itself). stop may be called more than once.
// WatchLoss is not subject to the fault hooks, and counts in
// [Stats.WatchLoss].
func (d *Driver) WatchLoss(l driver.Lease, lost func(err error)) (stop func()) {
	return d.b.watch(l, lost)
}

// Refresh implements [driver.Driver]. If l.Owner holds l.Key in l.Mode
// with token l.Token and the hold has not expired,
// it extends the hold to l.TTL from now and returns l with the hold's
// token. Otherwise it returns an error wrapping [driver.ErrNotHeld] and
// changes nothing: an expired or released hold is never re-created.
func (d *Driver) Refresh(ctx context.Context, l driver.Lease) (driver.Lease, error) {
	const op = "refresh"
	if err := d.begin(ctx); err != nil {
		return driver.Lease{}, d.errs.Wrap(ctx, op, l.Key, err)
	}
	d.b.mu.Lock()
	d.b.stats.Refresh++
	nl, err := d.b.refresh(op, l, time.Now())
	d.b.mu.Unlock()
	if d.replyLost() {
		return driver.Lease{}, d.errs.Wrap(ctx, op, l.Key, ErrReplyLost)
	}
	return nl, err
}

// RefreshBatch implements [driver.BatchRefresher]: it refreshes each of
// ls as [Driver.Refresh] would, all under one acquisition of the backend's
// lock, and counts as a single call for the fault hooks and for
// [Backend.Stats]. When the batch fails as a whole (done context, injected
// failure, lost reply) every element of the result carries the error.
func (d *Driver) RefreshBatch(ctx context.Context, ls []driver.Lease) []error {
	const op = "refresh"
	errs := make([]error, len(ls))
	fail := func(err error) []error {
		for i, l := range ls {
			errs[i] = d.errs.Wrap(ctx, op, l.Key, err)
		}
		return errs
	}
	if err := d.begin(ctx); err != nil {
		return fail(err)
	}
	d.b.mu.Lock()
	d.b.stats.RefreshBatch++
	now := time.Now()
	for i, l := range ls {
		_, errs[i] = d.b.refresh(op, l, now)
	}
	d.b.mu.Unlock()
	if d.replyLost() {
		return fail(ErrReplyLost)
	}
	return errs
}

// Release implements [driver.Driver]. It first removes l.Owner's entry from
// the wait queue of l.Key, if any. Then, if l.Owner holds l.Key in l.Mode
// with token l.Token (any token, when l.Abandoned) and the hold has not
// expired,
// it deletes the hold and wakes the key's subscribers; otherwise it returns
// an error wrapping [driver.ErrNotHeld] and leaves every hold untouched.
func (d *Driver) Release(ctx context.Context, l driver.Lease) error {
	const op = "release"
	if err := d.begin(ctx); err != nil {
		return d.errs.Wrap(ctx, op, l.Key, err)
	}
	err := d.b.release(op, l)
	if d.replyLost() {
		return d.errs.Wrap(ctx, op, l.Key, ErrReplyLost)
	}
	return err
}

// Subscribe implements [driver.Notifier]. The subscription's channel has a
// buffer of one value; the backend sends to it without blocking, so
// wake-ups that the subscriber has not yet received coalesce. It receives a
// value whenever, after Subscribe returns, key is released, its holds are
// ended by [Backend.Expire], an entry leaves its wait queue, or an
// operation finds and drops an expired hold or queue entry of key. The
// channel is never closed. Subscribe starts no goroutine; Close the
// subscription when done with it.
func (d *Driver) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	const op = "subscribe"
	if err := d.begin(ctx); err != nil {
		return nil, d.errs.Wrap(ctx, op, key, err)
	}
	return d.b.subscribe(key), nil
}

// Capabilities implements [driver.Describer]: the driver has every
// capability of the contract, and accepts TTLs from [MinTTL] to [MaxTTL].
func (d *Driver) Capabilities() driver.Capabilities {
	return driver.Capabilities{
		Shared: true, Counted: true, Values: true,
		MinTTL: MinTTL, MaxTTL: MaxTTL,
		Queue: true, TokenFloor: true,
		Notify: true, Acquire: true, WatchLoss: true, RefreshBatch: true, Inspect: true,
	}
}

// errs names the errors of the backend's operations; those of a Driver's
// calls are named by its own Errors, which also say when it is closed.
var errs = driverkit.Errors{Driver: "memdriver"}

// closedErr is the Closed of a Driver's Errors.
func (d *Driver) closedErr(error) error {
	if d.isClosed() {
		return driver.ErrClosed
	}
	return nil
}
