package memdriver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
)

// Backend is the in-process lock server: the lock state shared by all the
// drivers it hands out. The zero value is not usable; create one with
// [NewBackend]. A Backend is safe for concurrent use.
type Backend struct {
	mu    sync.Mutex
	keys  map[string]*keyState
	stats Stats
	// fan holds the live subscriptions, the internal ones of waiting
	// Acquire calls included.
	fan driverkit.Fanout
}

// Stats counts, per operation, the calls that reached a [Backend]. Calls
// stopped by a done context, by [Driver.Block] or by [Driver.FailNext] do
// not reach the backend and are not counted; calls whose reply is lost
// ([Driver.LoseReplies]) are. A RefreshBatch call counts once, in
// RefreshBatch, whatever the number of its leases. An Acquire call counts
// once, however long it waits and however often it is woken.
type Stats struct {
	TryAcquire int64
	// TryAcquireQueued counts the TryAcquire calls with Request.Queued
	// (TryAcquire counts the others).
	TryAcquireQueued int64
	Refresh          int64
	RefreshBatch     int64
	Release          int64
	Subscribe        int64
	Acquire          int64
	WatchLoss        int64
}

// Total returns the sum of all the counts.
func (s Stats) Total() int64 {
	return s.TryAcquire + s.TryAcquireQueued + s.Refresh + s.RefreshBatch +
		s.Release + s.Subscribe + s.Acquire + s.WatchLoss
}

// hold is one grant of a key.
type hold struct {
	token   uint64
	ttl     time.Duration
	expires time.Time
	weight  int64  // units of a counted hold, 0 for others
	value   string // the grant's Request.Value
}

// waiter is one entry of a key's wait queue.
type waiter struct {
	owner   string
	mode    driver.Mode
	limit   int64 // Request.Limit and Weight of a counted entry
	weight  int64
	ttl     time.Duration
	expires time.Time
	// pinned entries belong to an Acquire call that is waiting: they do
	// not expire, and leave the queue when the call returns.
	pinned bool
}

// until returns when w would expire were nobody to renew it: a pinned
// entry counts as renewed now.
func (w *waiter) until(now time.Time) time.Time {
	if w.pinned {
		return now.Add(w.ttl)
	}
	return w.expires
}

// keyState is everything the backend knows about one key. All state lives
// under the backend's one mutex, so every operation is atomic. Besides the
// holds and the fence counter, a key has a wait queue (queued requests of
// TryAcquire and Acquire), its live subscriptions and the loss watches of
// its holds. Subscribers are woken when the key is released, when
// Backend.Expire or Backend.Revoke ends its holds, when an entry leaves
// its wait queue, and when an operation finds and drops an expired hold or
// queue entry. Entries of the wait queue that belong to a waiting Acquire
// do not expire: the call keeps them until it returns.
type keyState struct {
	key string
	// fence is the last token granted for the key; never reset.
	fence uint64
	// mode is the mode of the holds; meaningful only while holders is
	// not empty.
	mode driver.Mode
	// limit is the limit of the holds when they are counted Shared ones,
	// 0 otherwise; meaningful only while holders is not empty.
	limit int64
	// holders maps owners to their holds: at most one when mode is
	// Exclusive.
	holders map[string]*hold
	// queue is the wait queue, in arrival order.
	queue []waiter
	// fan holds the backend's subscriptions, the key's among them.
	fan *driverkit.Fanout
	// watches are the live WatchLoss registrations on the key's holds.
	watches map[*lossWatch]struct{}
}

// NewBackend returns an empty backend.
func NewBackend() *Backend {
	return &Backend{keys: make(map[string]*keyState)}
}

// Driver returns a new client of b, with fault hooks of its own. Drivers
// of one backend see the same locks, as separate processes connected to one
// lock server would.
func (b *Backend) Driver() *Driver {
	d := &Driver{b: b}
	d.closed, d.close = context.WithCancel(context.Background())
	d.errs = driverkit.Errors{Driver: "memdriver", Closed: d.closedErr}
	return d
}

// Expire ends every hold of key now, as if its TTL had run out, wakes
// the key's subscribers, and reports the loss to the holds' watchers
// ([Driver.WatchLoss]). The holders' next Refresh or Release fails with an
// error wrapping [driver.ErrNotHeld]. The key's fence counter and wait
// queue are left as they are, so the next grant of key gets a greater
// token, and queued owners keep their places.
func (b *Backend) Expire(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ks := b.keys[key]
	if ks == nil {
		return
	}
	ks.sweep(time.Now())
	for owner := range ks.holders {
		ks.drop(owner, "hold ended by Backend.Expire")
	}
	ks.notify()
}

// Revoke ends owner's hold of key now, as an administrator revoking one
// lease would, wakes the key's subscribers, and reports the loss to the
// hold's watchers ([Driver.WatchLoss]). Other holds of key, its fence
// counter and its wait queue are left as they are. It reports whether
// owner held key.
func (b *Backend) Revoke(key, owner string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	ks := b.keys[key]
	if ks == nil {
		return false
	}
	ks.sweep(time.Now())
	if _, ok := ks.holders[owner]; !ok {
		return false
	}
	ks.drop(owner, "lease revoked by Backend.Revoke")
	ks.notify()
	return true
}

// Holders returns the live holds of key, ordered by token, after dropping
// the expired ones. Each lease's TTL is the one granted by the last
// TryAcquire or Refresh of that hold. It returns nil when nobody holds key.
func (b *Backend) Holders(key string) []driver.Lease {
	b.mu.Lock()
	defer b.mu.Unlock()
	ks := b.keys[key]
	if ks == nil {
		return nil
	}
	ks.sweep(time.Now())
	var ls []driver.Lease
	for owner, h := range ks.holders {
		ls = append(ls, driver.Lease{
			Key:   key,
			Owner: owner,
			Mode:  ks.mode,
			Token: h.token,
			TTL:   h.ttl,
		})
	}
	slices.SortFunc(ls, func(a, b driver.Lease) int { return cmp.Compare(a.Token, b.Token) })
	return ls
}

// Queued returns the owners in the live wait queue of key, head first,
// after dropping the expired entries. It returns nil when the queue is
// empty.
func (b *Backend) Queued(key string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	ks := b.keys[key]
	if ks == nil {
		return nil
	}
	ks.sweep(time.Now())
	var owners []string
	for _, w := range ks.queue {
		owners = append(owners, w.owner)
	}
	return owners
}

// Stats returns the number of calls of each kind that have reached b so
// far, from all its drivers.
func (b *Backend) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stats
}

// Calls returns the total number of calls that have reached b so far, from
// all its drivers: Stats().Total().
func (b *Backend) Calls() int64 {
	return b.Stats().Total()
}

// state returns the record of key, creating it if needed. b.mu must be
// held.
func (b *Backend) state(key string) *keyState {
	ks := b.keys[key]
	if ks == nil {
		ks = &keyState{
			key:     key,
			holders: make(map[string]*hold),
			fan:     &b.fan,
			watches: make(map[*lossWatch]struct{}),
		}
		b.keys[key] = ks
	}
	return ks
}

// sweep drops the expired holds, reporting their loss to their watchers,
// and the expired queue entries of ks, and wakes the subscribers if it
// dropped any.
func (ks *keyState) sweep(now time.Time) {
	changed := false
	for owner, h := range ks.holders {
		if !now.Before(h.expires) {
			ks.drop(owner, fmt.Sprintf("lease expired (TTL %v ran out)", h.ttl))
			changed = true
		}
	}
	n := len(ks.queue)
	ks.queue = slices.DeleteFunc(ks.queue, func(w waiter) bool { return !w.pinned && !now.Before(w.expires) })
	if len(ks.queue) != n {
		changed = true
	}
	if changed {
		ks.notify()
	}
}

// drop ends owner's hold because the backend lost it (not because its
// owner released it), and reports the loss to the hold's watchers, each
// from a goroutine of its own: never under b.mu.
func (ks *keyState) drop(owner, why string) {
	h := ks.holders[owner]
	if h == nil {
		return
	}
	delete(ks.holders, owner)
	for w := range ks.watches {
		if w.owner == owner && (w.token == 0 || w.token == h.token) {
			delete(ks.watches, w)
			go w.Fire(&driverkit.OpError{Driver: "memdriver", Op: "watch", Key: ks.key, Err: fmt.Errorf("%s: %w", why, driver.ErrNotHeld)})
		}
	}
}

// unwatch forgets, without reporting anything, the watches of owner's hold,
// which its owner released.
func (ks *keyState) unwatch(owner string) {
	for w := range ks.watches {
		if w.owner == owner {
			delete(ks.watches, w)
		}
	}
}

// nextExpiry returns the earliest time at which a hold or an unpinned
// queue entry of ks runs out, or the zero time if there is none.
func (ks *keyState) nextExpiry() time.Time {
	var next time.Time
	earlier := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, h := range ks.holders {
		earlier(h.expires)
	}
	for _, w := range ks.queue {
		if !w.pinned {
			earlier(w.expires)
		}
	}
	return next
}

// notify wakes every subscriber of ks without blocking; wake-ups coalesce
// in each subscription's one-slot buffer.
func (ks *keyState) notify() { ks.fan.Wake(ks.key) }

// queuePos returns the index of owner in the wait queue, or -1.
func (ks *keyState) queuePos(owner string) int {
	return slices.IndexFunc(ks.queue, func(w waiter) bool { return w.owner == owner })
}

// dequeue removes owner's queue entry, if any, and wakes the subscribers
// when it did.
func (ks *keyState) dequeue(owner string) {
	if i := ks.queuePos(owner); i >= 0 {
		ks.queue = slices.Delete(ks.queue, i, i+1)
		ks.notify()
	}
}

// acquire implements TryAcquire, queued or not.
func (b *Backend) acquire(op string, req driver.Request, queued bool) (driver.Lease, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if queued {
		b.stats.TryAcquireQueued++
	} else {
		b.stats.TryAcquire++
	}
	now := time.Now()
	ks := b.state(req.Key)
	ks.sweep(now)
	return ks.grant(op, req, queued, false, now)
}

// errOtherMode marks the error of a grant refused because the owner holds
// the key in the other mode: waiting cannot cure it.
var errOtherMode = errors.New("owner holds the key in the other mode")

// grant makes one attempt to grant req at now; ks has been swept. When the
// key cannot be granted and enqueue is set, req.Owner is recorded at the
// tail of the wait queue, or renewed where it already is; a pinned entry
// (a waiting Acquire's) does not expire. b.mu must be held.
func (ks *keyState) grant(op string, req driver.Request, enqueue, pinned bool, now time.Time) (driver.Lease, error) {
	lease := driver.Lease{Key: req.Key, Owner: req.Owner, Mode: req.Mode, TTL: req.TTL}

	// Idempotent re-acquire by a holder.
	if h, ok := ks.holders[req.Owner]; ok {
		if ks.mode != req.Mode {
			return driver.Lease{}, &driverkit.OpError{Driver: "memdriver", Op: op, Key: req.Key,
				Err: fmt.Errorf("%w (%v): %w", errOtherMode, ks.mode, &driver.LockedError{Remaining: h.expires.Sub(now)})}
		}
		h.ttl = req.TTL
		h.expires = now.Add(req.TTL)
		ks.dequeue(req.Owner)
		lease.Token = h.token
		return lease, nil
	}

	if err := ks.checkLimit(req); err != nil {
		return driver.Lease{}, errs.Wrap(nil, op, req.Key, err)
	}

	// What stands in the way: conflicting holds, then queue entries ahead.
	until, blocked := ks.inTheWay(req, now)
	if !blocked {
		ks.fence++
		ks.holders[req.Owner] = &hold{token: ks.fence, ttl: req.TTL, expires: now.Add(req.TTL), weight: req.Weight, value: req.Value}
		ks.mode, ks.limit = req.Mode, req.Limit
		ks.dequeue(req.Owner)
		lease.Token = ks.fence
		return lease, nil
	}

	if enqueue {
		w := waiter{owner: req.Owner, mode: req.Mode, limit: req.Limit, weight: req.Weight, ttl: req.TTL, expires: now.Add(req.TTL), pinned: pinned}
		if pos := ks.queuePos(req.Owner); pos >= 0 {
			w.pinned = w.pinned || ks.queue[pos].pinned
			ks.queue[pos] = w
		} else {
			ks.queue = append(ks.queue, w)
		}
	}
	return driver.Lease{}, errs.Wrap(nil, op, req.Key, &driver.LockedError{Remaining: max(until.Sub(now), 0)})
}

// checkLimit refuses a Shared request whose limit differs from that of
// the key's live holds or shared queue entries (driver.Capabilities.Counted).
func (ks *keyState) checkLimit(req driver.Request) error {
	if req.Mode != driver.Shared {
		return nil
	}
	if len(ks.holders) > 0 && ks.mode == driver.Shared && ks.limit != req.Limit {
		return &driver.LimitError{Limit: ks.limit}
	}
	for _, w := range ks.queue {
		if w.mode == driver.Shared && w.owner != req.Owner && w.limit != req.Limit {
			return &driver.LimitError{Limit: w.limit}
		}
	}
	return nil
}

// inTheWay reports whether holds or queue entries ahead keep req from
// being granted at now, and until when the last of them (the first, for a
// counted request, which more units may let in) may live.
func (ks *keyState) inTheWay(req driver.Request, now time.Time) (until time.Time, blocked bool) {
	counted := req.Limit > 0
	pick := later
	if counted {
		pick = sooner
	}
	held := int64(0)
	for _, h := range ks.holders {
		held += h.weight
	}
	if len(ks.holders) > 0 && (req.Mode == driver.Exclusive || ks.mode == driver.Exclusive ||
		(counted && held+req.Weight > req.Limit)) {
		blocked = true
		for _, h := range ks.holders {
			until = pick(until, h.expires)
		}
	}
	pos := ks.queuePos(req.Owner)
	if len(ks.queue) > 0 && !ks.servable(pos, req, held) {
		blocked = true
		ahead := ks.queue
		if pos >= 0 {
			ahead = ks.queue[:pos]
		}
		for i := range ahead {
			until = pick(until, ahead[i].until(now))
		}
	}
	return until, blocked
}

// servable reports whether the queue lets the owner at queue position pos
// (-1: not queued) be granted the key for req: it must be the head or, for
// Shared, part of the run of shared entries at the head, whose weights,
// with held units held, fit in a counted request's limit.
func (ks *keyState) servable(pos int, req driver.Request, held int64) bool {
	switch {
	case pos < 0:
		return false
	case pos == 0:
		return true
	case req.Mode != driver.Shared:
		return false
	}
	units := held + req.Weight
	for _, w := range ks.queue[:pos] {
		if w.mode != driver.Shared {
			return false
		}
		units += w.weight
	}
	return req.Limit == 0 || units <= req.Limit
}

// refresh implements Refresh for one lease. b.mu must be held.
func (b *Backend) refresh(op string, l driver.Lease, now time.Time) (driver.Lease, error) {
	ks := b.keys[l.Key]
	if ks == nil {
		return driver.Lease{}, errs.Wrap(nil, op, l.Key, driver.ErrNotHeld)
	}
	ks.sweep(now)
	h := ks.held(l)
	if h == nil {
		return driver.Lease{}, errs.Wrap(nil, op, l.Key, driver.ErrNotHeld)
	}
	h.ttl = l.TTL
	h.expires = now.Add(l.TTL)
	l.Token = h.token
	return l, nil
}

// release implements Release.
func (b *Backend) release(op string, l driver.Lease) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stats.Release++
	ks := b.keys[l.Key]
	if ks == nil {
		return errs.Wrap(nil, op, l.Key, driver.ErrNotHeld)
	}
	ks.sweep(time.Now())
	ks.dequeue(l.Owner)
	if ks.held(l) == nil {
		return errs.Wrap(nil, op, l.Key, driver.ErrNotHeld)
	}
	delete(ks.holders, l.Owner)
	ks.unwatch(l.Owner)
	ks.notify()
	return nil
}

// wait implements Acquire: it waits in the key's queue, with a pinned
// entry, until req is granted or ctx is done. It sleeps between attempts on
// an internal subscription to the key, which every change that may let it
// in wakes, and on a timer for the earliest expiry of a hold or queue
// entry of the key, which nothing announces.
func (b *Backend) wait(ctx context.Context, op string, req driver.Request) (driver.Lease, error) {
	b.mu.Lock()
	b.stats.Acquire++
	ks := b.state(req.Key)
	s := b.fan.Subscribe(req.Key)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		now := time.Now()
		ks.sweep(now)
		l, err := ks.grant(op, req, true, true, now)
		if err == nil || errors.Is(err, errOtherMode) || errors.Is(err, driver.ErrLimitMismatch) {
			s.Close()
			ks.dequeue(req.Owner)
			b.mu.Unlock()
			return l, err
		}
		next := ks.nextExpiry()
		b.mu.Unlock()

		var expiry <-chan time.Time
		if !next.IsZero() {
			if timer == nil {
				timer = time.NewTimer(next.Sub(now))
			} else {
				timer.Reset(next.Sub(now))
			}
			expiry = timer.C
		}
		select {
		case <-s.C():
		case <-expiry:
		case <-ctx.Done():
		}

		b.mu.Lock()
		if err := ctx.Err(); err != nil {
			s.Close()
			ks.dequeue(req.Owner)
			b.mu.Unlock()
			return driver.Lease{}, errs.Wrap(nil, op, req.Key, err)
		}
	}
}

// watch implements WatchLoss.
func (b *Backend) watch(l driver.Lease, lost func(error)) (stop func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stats.WatchLoss++
	w := &lossWatch{owner: l.Owner, token: l.Token, LossCallback: driverkit.NewLossCallback(lost)}
	ks := b.state(l.Key)
	ks.sweep(time.Now())
	if ks.held(l) == nil {
		go w.Fire(&driverkit.OpError{Driver: "memdriver", Op: "watch", Key: l.Key, Err: fmt.Errorf("lease not held when the watch began: %w", driver.ErrNotHeld)})
	} else {
		ks.watches[w] = struct{}{}
	}
	return func() {
		b.mu.Lock()
		delete(ks.watches, w)
		b.mu.Unlock()
		w.Stop()
	}
}

// lossWatch is one WatchLoss registration.
type lossWatch struct {
	owner string
	token uint64 // 0: any hold of owner
	*driverkit.LossCallback
}

// held returns the live hold that l designates: l.Owner's, in l.Mode,
// with token l.Token unless that is 0. It returns nil if there is none.
func (ks *keyState) held(l driver.Lease) *hold {
	h := ks.holders[l.Owner]
	if h == nil || ks.mode != l.Mode || (!l.Abandoned && l.Token != h.token) {
		return nil
	}
	return h
}

// subscribe implements Subscribe.
func (b *Backend) subscribe(key string) driver.Subscription {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stats.Subscribe++
	return b.fan.Subscribe(key)
}

// sooner returns the earlier of a and b, ignoring a zero a.
func sooner(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
