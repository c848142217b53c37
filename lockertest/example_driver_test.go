package lockertest_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
)

// store is the backend, standing in for a lock server: leases behind a
// mutex, and fence counters that survive releases and expiries.
type store struct {
	mu     sync.Mutex
	leases map[string]lease
	fence  map[string]uint64
}

type lease struct {
	owner   string
	token   uint64
	expires time.Time
}

func newStore() *store {
	return &store{leases: make(map[string]lease), fence: make(map[string]uint64)}
}

// mapDriver is a client of a store, and a complete driver: the three
// methods of driver.Driver and nothing else (exclusive holds, any TTL).
type mapDriver struct {
	s      *store
	closed atomic.Bool
	errs   driverkit.Errors // names errors; permanent once closed
}

func newMapDriver(s *store) *mapDriver {
	d := &mapDriver{s: s}
	d.errs = driverkit.Errors{Driver: "mapdriver", Closed: func(error) error {
		if d.closed.Load() {
			return driver.ErrClosed
		}
		return nil
	}}
	return d
}

// Close closes the client: every later call fails with a permanent error.
func (d *mapDriver) Close() { d.closed.Store(true) }

// live returns the lease of key unless it has expired (s.mu is held).
func (s *store) live(key string) (lease, bool) {
	cur, ok := s.leases[key]
	if ok && !time.Now().Before(cur.expires) {
		delete(s.leases, key)
		return lease{}, false
	}
	return cur, ok
}

// owns reports whether cur is l's (owner, and token unless abandoned).
func owns(cur lease, l driver.Lease) bool {
	return cur.owner == l.Owner && (l.Abandoned || cur.token == l.Token)
}

// TryAcquire grants req.Key to req.Owner with a new token, extends the
// lease of an owner that already holds it, or refuses with the time the
// holder's lease has left.
func (d *mapDriver) TryAcquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	if err := d.errs.Begin(ctx, "acquire", req.Key); err != nil {
		return driver.Lease{}, err
	}
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	cur, ok := d.s.live(req.Key)
	switch {
	case ok && cur.owner == req.Owner:
		// An idempotent re-acquire: same token, lease extended.
	case ok:
		return driver.Lease{}, d.errs.Wrap(ctx, "acquire", req.Key, &driver.LockedError{Remaining: time.Until(cur.expires)})
	default:
		d.s.fence[req.Key]++
		cur = lease{owner: req.Owner, token: d.s.fence[req.Key]}
	}
	cur.expires = time.Now().Add(req.TTL)
	d.s.leases[req.Key] = cur
	return driver.Lease{Key: req.Key, Owner: req.Owner, Mode: req.Mode, Token: cur.token, TTL: req.TTL}, nil
}

// Refresh extends l by l.TTL from now if l.Owner still holds l.Key.
func (d *mapDriver) Refresh(ctx context.Context, l driver.Lease) (driver.Lease, error) {
	if err := d.errs.Begin(ctx, "refresh", l.Key); err != nil {
		return driver.Lease{}, err
	}
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	cur, ok := d.s.live(l.Key)
	if !ok || !owns(cur, l) {
		return driver.Lease{}, d.errs.Wrap(ctx, "refresh", l.Key, driver.ErrNotHeld)
	}
	cur.expires = time.Now().Add(l.TTL)
	d.s.leases[l.Key] = cur
	l.Token = cur.token
	return l, nil
}

// Release deletes l if l.Owner still holds l.Key (with any token when
// l.Abandoned: the front-end cleans up after a call it gave up on).
func (d *mapDriver) Release(ctx context.Context, l driver.Lease) error {
	if err := d.errs.Begin(ctx, "release", l.Key); err != nil {
		return err
	}
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	if cur, ok := d.s.live(l.Key); !ok || !owns(cur, l) {
		return d.errs.Wrap(ctx, "release", l.Key, driver.ErrNotHeld)
	}
	delete(d.s.leases, l.Key)
	return nil
}

// A complete driver: the three methods of driver.Driver over a map.
// Package locker supplies waiting, renewal, loss detection and fairness;
// TestExampleDriver runs lockertest.TestDriver on it.
func Example_driver() {
	s := newStore()
	c := locker.New(newMapDriver(s), locker.WithTTL(time.Second))
	defer c.Close(context.Background())

	m := c.Mutex("orders/42")
	m.Lock()
	fmt.Println("holding orders/42 with token", m.Token())
	m.Unlock()

	// Another process, another client of the same store.
	other := locker.New(newMapDriver(s))
	defer other.Close(context.Background())
	m2 := other.Mutex("orders/42")
	m2.Lock()
	fmt.Println("the other client holds it with token", m2.Token())
	m2.Unlock()
	// Output:
	// holding orders/42 with token 1
	// the other client holds it with token 2
}
