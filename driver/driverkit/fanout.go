package driverkit

import (
	"sync"

	"github.com/go-locker/locker/driver"
)

// A Fanout keeps the live subscriptions of a driver's [driver.Notifier] by key
// and delivers wake-ups to them. Each subscription, a *FanoutSub that the
// driver's Subscribe returns as its [driver.Subscription], has a channel with a
// one-value buffer: wake-ups that its subscriber has not received yet
// coalesce into one, and a wake-up never blocks the driver.
//
// The driver keeps what it listens with (a pub/sub connection, a LISTEN
// connection, a watch) beside the Fanout, and calls
//   - Subscribe from its Notifier.Subscribe, once it listens for the key;
//   - Wake when it hears of a release of a key;
//   - WakeAll when it may have missed some (its connection broke, or
//     listens again after a break) and when it is closed, so that every
//     waiter tries again at once and, after a close, fails;
//   - Count and Total, under its own lock, from OnClose, to stop
//     listening for a key nobody waits on, or at all.
//
// Its methods are safe for concurrent use, and none calls out while it
// holds the Fanout's lock, so that a driver may call them under its own.
// The zero value is an empty Fanout.
type Fanout struct {
	// OnClose, if not nil, is called after a subscription of key has
	// been closed (once per subscription), outside the Fanout's lock.
	// A Subscribe may have come meanwhile: read Count or Total under
	// the lock that the driver's Subscribe holds too.
	OnClose func(key string)

	mu    sync.Mutex
	keys  map[string]map[*FanoutSub]struct{}
	total int
}

// Subscribe adds a subscription of key and returns it.
func (f *Fanout) Subscribe(key string) *FanoutSub {
	s := &FanoutSub{f: f, key: key, c: make(chan struct{}, 1)}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keys == nil {
		f.keys = make(map[string]map[*FanoutSub]struct{})
	}
	set := f.keys[key]
	if set == nil {
		set = make(map[*FanoutSub]struct{})
		f.keys[key] = set
	}
	set[s] = struct{}{}
	f.total++
	return s
}

// Wake wakes every live subscription of key.
func (f *Fanout) Wake(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for s := range f.keys[key] {
		s.wake()
	}
}

// WakeAll wakes every live subscription.
func (f *Fanout) WakeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, set := range f.keys {
		for s := range set {
			s.wake()
		}
	}
}

// Count returns how many live subscriptions key has.
func (f *Fanout) Count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.keys[key])
}

// Total returns how many live subscriptions there are, of all keys.
func (f *Fanout) Total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total
}

// remove removes s and reports whether it was live.
func (f *Fanout) remove(s *FanoutSub) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	set := f.keys[s.key]
	if _, ok := set[s]; !ok {
		return false
	}
	delete(set, s)
	if len(set) == 0 {
		delete(f.keys, s.key)
	}
	f.total--
	return true
}

// A FanoutSub is a subscription of a [Fanout]. It implements
// [driver.Subscription].
type FanoutSub struct {
	f   *Fanout
	key string
	c   chan struct{}
}

var _ driver.Subscription = (*FanoutSub)(nil)

// Key returns the subscription's key.
func (s *FanoutSub) Key() string { return s.key }

// C implements Subscription: the channel receives a value after each
// wake-up; wake-ups not yet received coalesce.
func (s *FanoutSub) C() <-chan struct{} { return s.c }

// Close implements Subscription: it removes the subscription from its
// Fanout, whose OnClose then runs. It returns nil, and does nothing the
// second time.
func (s *FanoutSub) Close() error {
	if s.f.remove(s) && s.f.OnClose != nil {
		s.f.OnClose(s.key)
	}
	return nil
}

// wake puts a value in s's channel unless one is waiting there.
func (s *FanoutSub) wake() {
	select {
	case s.c <- struct{}{}:
	default:
	}
}
