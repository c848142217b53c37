package etcddriver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A keyWatch is the driver's watch of one lock's key range, shared by the
// driver's waiters, loss watchers and subscriptions of that lock. It
// watches deletions only (WithFilterPut): an entry leaves the range when its
// owner releases it or leaves the queue, or when its lease expires or is
// revoked.
//
// The watch has no start revision, so etcd starts it after its current
// revision (rev+1) and counts it as synced at once: it sends every later
// event as it happens, where a watch started at an older revision waits for
// etcd's 100 ms resync loop. The revision in the created reply is the point
// after which no event is missed: users read the range after it.
type keyWatch struct {
	d      *Driver
	base   string
	refs   int         // guarded by d.mu
	idle   *time.Timer // guarded by d.mu; runs while refs == 0
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	ready  chan struct{} // closed once the watch was first created

	mu          sync.Mutex
	established bool
	since       int64 // the revision the watch was last (re)created at: every later deletion is delivered
	listeners   map[listener]struct{}
}

// A listener receives a keyWatch's events. Its methods are called with the
// keyWatch's mutex held, in revision order; they must not block.
type listener interface {
	// deleted reports that key was deleted at revision rev.
	deleted(key string, rev int64)
	// reset reports that the watch broke and was created again at rev:
	// deletions between the last event and rev may have been missed.
	reset(rev int64)
	// ended reports that the watch ended for good, with the driver or its
	// client: no more events will come.
	ended()
}

// watch returns the keyWatch of base with one more reference; drop it
// with release.
func (d *Driver) watch(base string) *keyWatch {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.watchLocked(base)
}

// watchLocked is watch with d.mu held.
func (d *Driver) watchLocked(base string) *keyWatch {
	w := d.watches[base]
	if w == nil {
		w = &keyWatch{
			d:         d,
			base:      base,
			done:      make(chan struct{}),
			ready:     make(chan struct{}),
			listeners: make(map[listener]struct{}),
		}
		w.ctx, w.cancel = context.WithCancel(d.ctx)
		if !d.closed {
			d.watches[base] = w
			d.bg.Add(1)
			go w.run()
		} else {
			w.cancel()
			close(w.done)
		}
	}
	w.refs++
	if w.idle != nil {
		w.idle.Stop()
		w.idle = nil
	}
	return w
}

// release drops a reference taken by watch. The watch stays open for the
// driver's linger time after the last one, for the next user.
func (w *keyWatch) release() {
	d := w.d
	d.mu.Lock()
	defer d.mu.Unlock()
	w.refs--
	if w.refs > 0 || d.watches[w.base] != w {
		return
	}
	w.idle = time.AfterFunc(d.linger, func() {
		d.mu.Lock()
		if w.refs > 0 || d.watches[w.base] != w {
			d.mu.Unlock()
			return
		}
		delete(d.watches, w.base)
		w.idle = nil
		d.mu.Unlock()
		w.stop()
	})
}

// stop ends the watch and waits for its goroutine.
func (w *keyWatch) stop() {
	w.cancel()
	<-w.done
}

// add registers l and reports whether the watch is established and after
// which revision it delivers every deletion.
func (w *keyWatch) add(l listener) (established bool, since int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.listeners[l] = struct{}{}
	return w.established, w.since
}

// remove unregisters l; once it returns, l gets no more calls.
func (w *keyWatch) remove(l listener) {
	w.mu.Lock()
	delete(w.listeners, l)
	w.mu.Unlock()
}

// waitReady waits until the watch is created.
func (w *keyWatch) waitReady(ctx context.Context) error {
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-w.done:
		if err := w.d.closedErr(); err != nil {
			return err
		}
		return errClosed
	}
}

// run keeps the watch open until the keyWatch is stopped, or the driver or
// its client is closed.
func (w *keyWatch) run() {
	defer w.d.bg.Done()
	defer close(w.done)
	defer w.end()
	var bo driverkit.Backoff // 10ms doubling to 1s
	for w.ctx.Err() == nil {
		// WithRequireLeader: a member cut off from its cluster ends the
		// watch instead of leaving it silent, and the client moves on.
		ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(w.ctx))
		ch := w.d.watcher.Watch(ctx, w.base, clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
		for resp := range ch {
			if resp.Created {
				w.created(resp.Header.Revision)
				bo.Reset()
				continue
			}
			for _, ev := range resp.Events {
				if ev.Type == mvccpb.DELETE {
					w.dispatch(string(ev.Kv.Key), ev.Kv.ModRevision)
				}
			}
		}
		cancel()
		if w.ctx.Err() != nil || w.d.client.Ctx().Err() != nil {
			return
		}
		select {
		case <-time.After(bo.Next()):
		case <-w.ctx.Done():
			return
		}
	}
}

// created records that the watch was (re)created at rev.
func (w *keyWatch) created(rev int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	first := !w.established
	w.established, w.since = true, rev
	if first {
		close(w.ready)
		return
	}
	for l := range w.listeners {
		l.reset(rev)
	}
	w.d.fan.Wake(w.base)
}

// end tells the listeners that the watch ended for good, when it ends with
// the driver or its client rather than for want of users.
func (w *keyWatch) end() {
	if w.d.closedErr() == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for l := range w.listeners {
		l.ended()
	}
	w.d.fan.Wake(w.base)
}

func (w *keyWatch) dispatch(key string, rev int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for l := range w.listeners {
		l.deleted(key, rev)
	}
	w.d.fan.Wake(w.base)
}

// Subscribe implements driver.Notifier: the subscription's channel
// receives a value whenever an entry of key is deleted (a release, a
// waiter leaving the queue, an expiry or a revocation), and whenever the
// driver had to re-create the key's watch. Subscribe returns once the
// key's watch is in place, so that no later release is missed. When the
// driver or its client is closed, the channel receives a value too: the
// subscriber's next call fails with a permanent error.
//
// A subscription is a *driverkit.FanoutSub of the driver's Fanout, keyed by
// the lock's base, and a reference to the key's watch, which the watch's
// events wake through the Fanout and which the subscription's Close drops
// (see unsubscribed).
func (d *Driver) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	if err := d.begin(ctx); err != nil {
		return nil, d.fail(ctx, "subscribe", key, err)
	}
	base := d.base(key)
	w := d.watch(base)
	s := d.fan.Subscribe(base)
	if err := w.waitReady(ctx); err != nil {
		s.Close()
		return nil, d.fail(ctx, "subscribe", key, err)
	}
	return s, nil
}

// unsubscribed drops the watch reference of a closed subscription of
// base: while it was live, its reference kept the watch in d.watches.
func (d *Driver) unsubscribed(base string) {
	d.mu.Lock()
	w := d.watches[base]
	d.mu.Unlock()
	if w != nil {
		w.release()
	}
}

// watchLossByKey is WatchLoss for a lease whose owner this driver has no
// record of (its entry was made through another Driver): it finds the
// entry by reading, then watches the entry's key through the lock's
// keyWatch.
func (d *Driver) watchLossByKey(l driver.Lease, lost func(err error)) (stop func()) {
	base := d.base(l.Key)
	w := d.watch(base)
	ll := &lossListener{d: d, w: w, lease: l, token: int64(l.Token), lost: driverkit.NewLossCallback(lost), stopc: make(chan struct{})}
	w.add(ll)
	ll.verifyAsync() // finds the entry, or reports it gone
	var once sync.Once
	return func() {
		once.Do(func() {
			w.remove(ll)
			ll.lost.Stop()
			close(ll.stopc)
			d.mu.Lock()
			if set := d.losses[ll.key]; set != nil {
				delete(set, ll)
				if len(set) == 0 {
					delete(d.losses, ll.key)
				}
			}
			d.mu.Unlock()
			w.release()
		})
	}
}

// A lossListener is a WatchLoss registration that watches an entry's key
// (see watchLossByKey).
type lossListener struct {
	d     *Driver
	w     *keyWatch
	lease driver.Lease
	key   string // the entry's key once found; guarded by w.mu
	token int64
	lost  *driverkit.LossCallback
	stopc chan struct{} // closed by stop
}

func (ll *lossListener) deleted(key string, rev int64) {
	if key == ll.key && rev > ll.token { // ll.key is guarded by the watch's mutex
		ll.fire(fmt.Errorf("etcd deleted the entry at revision %d (lease expired or revoked, or key deleted): %w", rev, driver.ErrNotHeld))
	}
}

func (ll *lossListener) reset(int64) { ll.verifyAsync() }
func (ll *lossListener) ended()      {}

// silenceKey silences the key-watch WatchLoss registrations of entry k
// before a Release deletes it.
func (d *Driver) silenceKey(k string) {
	d.mu.Lock()
	var ls []*lossListener
	for ll := range d.losses[k] {
		ls = append(ls, ll)
	}
	d.mu.Unlock()
	for _, ll := range ls {
		ll.lost.Stop()
	}
}

// fire reports the loss, unless it was reported or the registration
// stopped.
func (ll *lossListener) fire(err error) { ll.lost.Fire(opError("watch", ll.lease.Key, err)) }

// verifyAsync checks, once the watch is in place, that the entry still
// exists with its token, and reports the loss if not.
func (ll *lossListener) verifyAsync() {
	d := ll.d
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		select {
		case <-ll.w.ready:
		case <-ll.stopc:
			return
		case <-ll.w.done:
			return
		}
		var bo driverkit.Backoff // 10ms doubling to 1s
		for {
			ctx, cancel := context.WithTimeout(d.ctx, 5*time.Second)
			ll.w.mu.Lock()
			k := ll.key
			ll.w.mu.Unlock()
			var kv *mvccpb.KeyValue
			var err error
			if k == "" {
				kv, err = d.find(ctx, d.base(ll.lease.Key), ll.lease.Mode, ll.lease.Owner)
			} else {
				var resp *clientv3.GetResponse
				if resp, err = d.kv.Get(ctx, k); err == nil && len(resp.Kvs) > 0 {
					kv = resp.Kvs[0]
				}
			}
			cancel()
			if err == nil {
				if kv == nil || !isOwner(kv.Value, ll.lease.Owner) || kv.CreateRevision != ll.token {
					ll.fire(fmt.Errorf("the entry is gone: %w", driver.ErrNotHeld))
				} else if k == "" {
					// Found: from now on the watch reports its deletion;
					// read it once more, in case it went meanwhile.
					ll.w.mu.Lock()
					ll.key = string(kv.Key)
					ll.w.mu.Unlock()
					d.mu.Lock()
					set := d.losses[ll.key]
					if set == nil {
						set = make(map[*lossListener]struct{})
						d.losses[ll.key] = set
					}
					set[ll] = struct{}{}
					d.mu.Unlock()
					continue
				}
				return
			}
			select {
			case <-time.After(bo.Next()):
			case <-ll.stopc:
				return
			case <-d.ctx.Done():
				return
			}
		}
	}()
}
