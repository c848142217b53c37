package etcddriver

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

const (
	// DefaultPrefix is the key prefix used when Options.Prefix is empty.
	DefaultPrefix = "locker/"
	// MaxTTL is the longest lease etcd grants (9,000,000,000 seconds).
	MaxTTL = 9_000_000_000 * time.Second
	// DefaultLockDelay is Options.LockDelay's default.
	DefaultLockDelay = 250 * time.Millisecond
	// DefaultWatchLinger is Options.WatchLinger's default.
	DefaultWatchLinger = 3 * time.Second
)

// Options configures a Driver. The zero value, like a nil *Options, selects
// the defaults.
type Options struct {
	// Prefix starts every etcd key the driver uses; drivers that share
	// locks share a prefix. Empty means DefaultPrefix.
	Prefix string

	// MinTTL is the shortest lease the etcd cluster grants: 1.5 times its
	// election timeout, rounded up to whole seconds. When it is zero, the
	// driver reports one second (etcd's unit) until a lease grant shows
	// a longer minimum: etcd raises a TTL below its minimum, and the
	// driver then fails that lock call with an error naming the minimum
	// and reports it in its Capabilities from then on, so that package
	// locker refuses such TTLs before any I/O.
	MinTTL time.Duration

	// LockDelay is how long Acquire waits before it returns a grant that
	// followed the end of the holder's lease rather than its release (see
	// Losing a hold in the package documentation). Zero means
	// DefaultLockDelay; a negative value disables the delay.
	LockDelay time.Duration

	// WatchLinger is how long the watch of a lock key stays open after
	// its last user in this driver is done, so that the next waiter on a
	// contended key does not open a watch again (a round trip before it
	// may queue). Zero means DefaultWatchLinger.
	WatchLinger time.Duration
}

// Driver is a locker driver over an etcd client. It is safe for
// concurrent use. Create it with New; Close stops its background work.
type Driver struct {
	errs      driverkit.Errors // names the driver's errors, permanent once closed
	client    *clientv3.Client
	kv        clientv3.KV
	watcher   clientv3.Watcher
	leases    clientv3.Lease
	rawLeases pb.LeaseClient
	prefix    string
	minTTL    atomic.Int64 // in seconds: Options.MinTTL, or learnt (grant)
	linger    time.Duration

	ctx    context.Context // ends with Close or the client
	cancel context.CancelFunc
	bg     sync.WaitGroup // background goroutines

	mu      sync.Mutex
	closed  bool
	owners  map[string]*entry       // entries this driver made, by owner
	pools   map[int64][]pooledLease // idle leases by TTL in seconds
	watches map[string]*keyWatch    // by lock base
	fan     driverkit.Fanout        // subscriptions, by lock base (see Subscribe)

	id           string                            // random, names the driver in entries and sentinels
	lockDelay    time.Duration                     // see Options.LockDelay
	sentinelBase string                            // <prefix>%leases/<driver id>/
	sentinels    *keyWatch                         // the watch on the driver's lease sentinels, once started
	leaseLosses  map[clientv3.LeaseID][]*leaseLoss // WatchLoss registrations, by lease

	kaMu sync.Mutex
	ka   *kaStream // nil until needed; replaced by kaStream once broken

	releases *driverkit.LRU[string, *releaseCall] // under mu: the last Release's Delete of entry keys
}

// entry is what the driver remembers of an entry it made: which lease it
// is attached to and how long that lease is known to live.
type entry struct {
	key      string // the entry's etcd key
	base     string // the lock's base
	mode     driver.Mode
	lease    clientv3.LeaseID
	ttl      int64     // seconds
	deadline time.Time // the lease lives at least until then
	token    int64     // create revision, once known
	unsure   bool      // a Delete of the entry may still be applied: its lease never goes back to the pool
}

var (
	_ driver.Driver         = (*Driver)(nil)
	_ driver.Describer      = (*Driver)(nil)
	_ driver.Acquirer       = (*Driver)(nil)
	_ driver.Notifier       = (*Driver)(nil)
	_ driver.LossWatcher    = (*Driver)(nil)
	_ driver.BatchRefresher = (*Driver)(nil)
	_ driver.Inspector      = (*Driver)(nil)
)

// errClosed and errClientClosed say why a driver can no longer be used
// (see Driver.fail).
var (
	errClosed       = errors.New("driver closed")
	errClientClosed = errors.New("etcd client closed")
)

// New returns a Driver over client's KV, Watcher and Lease (a client
// wrapped by package namespace works). opts may be nil. New does no I/O:
// the first lock call is the first request to the cluster (see
// Options.MinTTL for how the driver learns the cluster's minimum lease
// TTL). The driver does not close client.
func New(client *clientv3.Client, opts *Options) (*Driver, error) {
	if client == nil {
		return nil, errors.New("etcddriver: nil client")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MinTTL < 0 || o.MinTTL%time.Second != 0 {
		return nil, fmt.Errorf("etcddriver: MinTTL %v is not a whole, non-negative number of seconds", o.MinTTL)
	}
	d := &Driver{
		client:      client,
		kv:          client.KV,
		watcher:     client.Watcher,
		leases:      client.Lease,
		rawLeases:   clientv3.RetryLeaseClient(client),
		prefix:      cmp.Or(o.Prefix, DefaultPrefix),
		linger:      cmp.Or(max(o.WatchLinger, 0), DefaultWatchLinger),
		lockDelay:   cmp.Or(o.LockDelay, DefaultLockDelay),
		owners:      make(map[string]*entry),
		pools:       make(map[int64][]pooledLease),
		watches:     make(map[string]*keyWatch),
		leaseLosses: make(map[clientv3.LeaseID][]*leaseLoss),
		releases:    driverkit.NewLRU[string, *releaseCall](maxReleases),
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	d.id = hex.EncodeToString(id[:])
	d.sentinelBase = d.prefix + sentinelDir + d.id + "/"
	d.fan.OnClose = d.unsubscribed
	d.minTTL.Store(max(int64(o.MinTTL/time.Second), 1))
	d.ctx, d.cancel = context.WithCancel(client.Ctx())
	d.errs = driverkit.Errors{Driver: "etcddriver", Closed: func(error) error { return d.closedErr() }}
	return d, nil
}

// Close stops the driver's watches and keep-alive stream and revokes its
// idle leases (for at most closeRevokeTimeout): holds and queue entries
// stay until their leases run out. Calls after Close fail. Close does not
// close the client.
func (d *Driver) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	ws, pools := slices.Collect(maps.Values(d.watches)), d.pools
	d.pools = nil
	d.mu.Unlock()
	d.cancel()
	for _, w := range ws {
		w.stop()
	}
	d.bg.Wait()
	if d.client.Ctx().Err() != nil {
		return nil // nothing can be sent: the idle leases expire on their own
	}
	ctx, cancel := context.WithTimeout(d.client.Ctx(), closeRevokeTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, pool := range pools {
		for _, p := range pool {
			wg.Go(func() { _, _ = d.leases.Revoke(ctx, p.id) })
		}
	}
	wg.Wait()
	return nil
}

// closeRevokeTimeout bounds Close's revocation of the idle leases.
const closeRevokeTimeout = time.Second

// Prefix returns the key prefix of the driver.
func (d *Driver) Prefix() string { return d.prefix }

// Capabilities implements driver.Describer: everything optional, with
// TTLs in whole seconds from the cluster's minimum lease TTL to MaxTTL.
func (d *Driver) Capabilities() driver.Capabilities {
	return driver.Capabilities{
		Shared: true, Counted: true, Values: true,
		MinTTL: time.Duration(d.minTTL.Load()) * time.Second, MaxTTL: MaxTTL, TTLUnit: time.Second,
		Queue:  true,
		Notify: true, Acquire: true, WatchLoss: true, RefreshBatch: true, Inspect: true,
	}
}

// begin refuses a call on a done context or a closed driver.
func (d *Driver) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return d.closedErr()
}

// closedErr returns errClientClosed once the etcd client is closed,
// errClosed once the driver is, and nil before.
func (d *Driver) closedErr() error {
	if d.client.Ctx().Err() != nil {
		return errClientClosed
	}
	if d.ctx.Err() != nil {
		return errClosed
	}
	return nil
}

// request returns the context of a call: ctx, which also reports itself
// canceled (Err) once the driver or its client is closed. clientv3
// retries a request that failed with gRPC's code Canceled, which every
// request of a closed client fails with, for as long as the request's
// context lives (about 100 times, 25 ms apart): this ends the retries
// without a context and a callback of its own for every call (about 12 %
// of a pair's client CPU in a profile of 16 goroutines on distinct keys). Requests in flight when the driver is closed run to their end;
// waits end with the driver's watches and keep-alive stream.
func (d *Driver) request(ctx context.Context) context.Context {
	return requestCtx{ctx, d}
}

// A requestCtx is the context of request.
type requestCtx struct {
	context.Context
	d *Driver
}

// Err returns the parent's error, or context.Canceled once the driver or
// its client is closed.
func (c requestCtx) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	if c.d.ctx.Err() != nil {
		return context.Canceled
	}
	return nil
}

// spawn runs f on a goroutine of the driver's, which Close waits for,
// unless the driver is closed; it reports whether f runs.
func (d *Driver) spawn(f func()) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	d.bg.Go(f)
	return true
}

// base returns the base of key's entries.
func (d *Driver) base(key string) string { return lockBase(d.prefix, key) }

// entryOf returns the entry the driver made for owner in mode m below
// base.
func (d *Driver) entryOf(owner, base string, m driver.Mode) (entry, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e := d.owners[owner]; e != nil && e.base == base && e.mode == m {
		return *e, true
	}
	return entry{}, false
}

// at returns owner's entry at k, if the driver has it, after calling f
// on it (when f is not nil) with d.mu held.
func (d *Driver) at(owner, k string, f func(e *entry)) (entry, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.owners[owner]
	if e == nil || e.key != k {
		return entry{}, false
	}
	if f != nil {
		f(e)
	}
	return *e, true
}

// lookup returns owner's entry at k.
func (d *Driver) lookup(owner, k string) (entry, bool) { return d.at(owner, k, nil) }

// remember records e as owner's entry.
func (d *Driver) remember(owner string, e entry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.closed {
		d.owners[owner] = &e
	}
}

// confirm extends the known life of owner's entry at k after a keep-alive
// sent at sent was confirmed, and records its token when known.
func (d *Driver) confirm(owner, k string, sent time.Time, token int64) {
	d.at(owner, k, func(e *entry) {
		if dl := sent.Add(time.Duration(e.ttl) * time.Second); dl.After(e.deadline) {
			e.deadline = dl
		}
		if token != 0 {
			e.token = token
		}
	})
}

// unsure marks owner's entry at k as one whose Delete may still be
// applied later: its lease must not go back to the pool, where a new
// entry on it would have the same key.
func (d *Driver) unsure(owner, k string) { d.at(owner, k, func(e *entry) { e.unsure = true }) }

// forget drops owner's entry at k and returns it.
func (d *Driver) forget(owner, k string) (entry, bool) {
	return d.at(owner, k, func(*entry) { delete(d.owners, owner) })
}

// Cmp returns the comparison CreateRevision(<entry key>) == token, which
// holds in an etcd transaction exactly while the hold of key with fencing
// token token is in place (see Fencing in the package documentation). The
// entry key names the hold's lease, which only the driver that granted it
// knows: Cmp works for holds granted through d and not yet released, and
// returns an error wrapping driver.ErrNotHeld otherwise, without a request.
func (d *Driver) Cmp(key string, token uint64) (clientv3.Cmp, error) {
	base, k := d.base(key), ""
	d.mu.Lock()
	for _, e := range d.owners {
		if token != 0 && e.base == base && uint64(e.token) == token {
			k = e.key
		}
	}
	d.mu.Unlock()
	if k == "" {
		return clientv3.Cmp{}, d.errs.Wrap(nil, "cmp", key, fmt.Errorf("no hold with token %d granted by this driver: %w", token, driver.ErrNotHeld))
	}
	return clientv3.Compare(clientv3.CreateRevision(k), "=", int64(token)), nil
}
