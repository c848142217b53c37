package etcddriver

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// sentinelDir holds the lease sentinels, <prefix>%leases/<driver
// id>/<lease id> (see Losing a hold in the package documentation).
const sentinelDir = "%leases/"

// sentinelKey returns the sentinel key of lease id.
func (d *Driver) sentinelKey(id clientv3.LeaseID) string {
	return d.sentinelBase + strconv.FormatInt(int64(id), 16)
}

// startSentinels opens the driver's watch on its sentinels, once, and
// waits until it is established, so that it covers every sentinel put
// afterwards.
func (d *Driver) startSentinels(ctx context.Context) error {
	d.mu.Lock()
	w := d.sentinels
	d.mu.Unlock()
	if w == nil { // racers get the same keyWatch, and the same listener
		w = d.watch(d.sentinelBase) // never released
		w.add(sentinelListener{d})
		d.mu.Lock()
		d.sentinels = w
		d.mu.Unlock()
	}
	return w.waitReady(ctx)
}

// A leaseLoss is a WatchLoss registration of a hold on a lease.
type leaseLoss struct {
	d     *Driver
	lease clientv3.LeaseID
	key   string // the lock key, for errors
	lost  driverkit.LossCallback
}

// fire reports the loss, unless it was reported or the registration
// stopped.
func (ll *leaseLoss) fire(err error) { ll.lost.Fire(ll.d.errs.Wrap(nil, "watch", ll.key, err)) }

// WatchLoss implements driver.LossWatcher: lost is called, at most once
// and on a goroutine of the driver's, when the lease of l's entry ends, as
// the driver's watch on its lease sentinels reports it (see Losing a hold
// in the package documentation), or at once for a lease this driver has
// no record of (its entry was found gone, or released). A Release of l is
// not a loss.
func (d *Driver) WatchLoss(l driver.Lease, lost func(err error)) (stop func()) {
	if l.Token == 0 || lost == nil {
		return func() {}
	}
	ll := &leaseLoss{d: d, key: l.Key}
	ll.lost.Set(lost)
	d.mu.Lock()
	e := d.owners[l.Owner]
	held := !d.closed && e != nil && e.base == d.base(l.Key) && e.mode == l.Mode
	if held {
		ll.lease = e.lease
		d.leaseLosses[e.lease] = append(d.leaseLosses[e.lease], ll)
	}
	d.mu.Unlock()
	if !held {
		d.spawn(func() { ll.fire(fmt.Errorf("no hold of this driver with token %d: %w", l.Token, driver.ErrNotHeld)) })
	}
	return ll.stop
}

// stop ends the registration.
func (ll *leaseLoss) stop() {
	ll.lost.Stop()
	d := ll.d
	d.mu.Lock()
	if ls := slices.DeleteFunc(d.leaseLosses[ll.lease], func(x *leaseLoss) bool { return x == ll }); len(ls) > 0 {
		d.leaseLosses[ll.lease] = ls
	} else {
		delete(d.leaseLosses, ll.lease)
	}
	d.mu.Unlock()
}

// stopLosses ends the WatchLoss registrations on lease: silently before
// its hold's Release (ended is ""; a release is not a loss, and the lease
// goes on to other holds), or reporting the loss when the lease ended.
func (d *Driver) stopLosses(lease clientv3.LeaseID, ended string) {
	d.mu.Lock()
	ls := d.leaseLosses[lease]
	delete(d.leaseLosses, lease)
	d.mu.Unlock()
	for _, ll := range ls {
		if ended == "" {
			ll.lost.Stop()
		} else {
			ll.fire(fmt.Errorf("lease %x %s: %w", lease, ended, driver.ErrNotHeld))
		}
	}
}

// leaseEnded marks lease dead: its entries and pooled copy are dropped,
// and the holds on it reported lost.
func (d *Driver) leaseEnded(lease clientv3.LeaseID, why string) {
	d.mu.Lock()
	for owner, e := range d.owners {
		if e.lease == lease {
			delete(d.owners, owner) // the entry went with the lease
		}
	}
	for ttl, pool := range d.pools {
		d.pools[ttl] = slices.DeleteFunc(pool, func(p pooledLease) bool { return p.id == lease })
	}
	d.mu.Unlock()
	d.stopLosses(lease, why)
}

// sentinelListener turns the sentinel watch's events into lease losses.
type sentinelListener struct{ d *Driver }

// lease returns the lease whose sentinel is key.
func (s sentinelListener) lease(key []byte) (clientv3.LeaseID, bool) {
	id, err := strconv.ParseInt(string(key[len(s.d.sentinelBase):]), 16, 64)
	return clientv3.LeaseID(id), err == nil
}

func (s sentinelListener) deleted(key string, rev int64) {
	if id, ok := s.lease([]byte(key)); ok {
		s.d.leaseEnded(id, fmt.Sprintf("ended at revision %d (expired or revoked)", rev))
	}
}

// reset reads the sentinels after the watch was re-created, until it
// succeeds: the driver's leases (held or pooled) that ended meanwhile are
// reported.
func (s sentinelListener) reset() {
	d := s.d
	d.spawn(func() {
		var bo driverkit.Backoff
		for d.ctx.Err() == nil {
			ctx, cancel := context.WithTimeout(d.ctx, 5*time.Second)
			resp, err := d.kv.Get(ctx, d.sentinelBase, clientv3.WithPrefix(), clientv3.WithKeysOnly())
			cancel()
			if err == nil {
				s.ended(resp.Kvs)
				return
			}
			select {
			case <-time.After(bo.Next()):
			case <-d.ctx.Done():
			}
		}
	})
}

// ended reports the leases of the driver without a sentinel in alive.
func (s sentinelListener) ended(alive []*mvccpb.KeyValue) {
	d, live := s.d, make(map[clientv3.LeaseID]bool, len(alive))
	for _, kv := range alive {
		if id, ok := s.lease(kv.Key); ok {
			live[id] = true
		}
	}
	gone := map[clientv3.LeaseID]bool{}
	d.mu.Lock()
	for _, e := range d.owners {
		gone[e.lease] = !live[e.lease]
	}
	for _, pool := range d.pools {
		for _, p := range pool {
			gone[p.id] = !live[p.id]
		}
	}
	d.mu.Unlock()
	for id, g := range gone {
		if g {
			d.leaseEnded(id, "ended while the driver's watch was re-created")
		}
	}
}
