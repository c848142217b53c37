package etcddriver

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A keyWatch is the driver's watch of deletions (WithFilterPut) in one
// lock's key range, shared by the driver's waiters and subscriptions of that
// lock (see docs/etcddriver.md, Waiting).
type keyWatch struct {
	d      *Driver
	base   string
	refs   int         // guarded by d.mu
	idle   *time.Timer // guarded by d.mu; runs while refs == 0
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	ready  chan struct{} // closed once the watch was first created

	mu        sync.Mutex
	created   bool
	listeners map[listener]struct{}
}

// A listener receives a keyWatch's events, with the keyWatch's mutex held,
// in revision order; its methods must not block.
type listener interface {
	// deleted reports that key was deleted at revision rev.
	deleted(key string, rev int64)
	// reset reports that the watch broke and was created again:
	// deletions since the last event may have been missed.
	reset()
}

// watch returns the keyWatch of base with one more reference; drop it
// with release.
func (d *Driver) watch(base string) *keyWatch {
	d.mu.Lock()
	defer d.mu.Unlock()
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
			d.bg.Go(w.run)
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

// add registers l.
func (w *keyWatch) add(l listener) {
	w.mu.Lock()
	w.listeners[l] = struct{}{}
	w.mu.Unlock()
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
		return cmp.Or(w.d.closedErr(), errClosed)
	}
}

// run keeps the watch open (with WithRequireLeader, so that a member cut
// off from its cluster ends it) until the keyWatch is stopped, or the
// driver or its client is closed.
func (w *keyWatch) run() {
	defer close(w.done)
	defer w.d.fan.Wake(w.base) // subscribers see a closed driver at their next attempt
	var bo driverkit.Backoff   // 10ms doubling to 1s
	for w.ctx.Err() == nil {
		ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(w.ctx))
		ch := w.d.watcher.Watch(ctx, w.base, clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
		for resp := range ch {
			if resp.Created {
				w.recreated()
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

// recreated records that the watch was (re)created.
func (w *keyWatch) recreated() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.created {
		w.created = true
		close(w.ready)
		return
	}
	for l := range w.listeners {
		l.reset()
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

// Subscribe implements driver.Notifier: the subscription (a
// *driverkit.FanoutSub keyed by the lock's base, holding a reference to
// the key's watch) receives a value whenever an entry of key is deleted,
// the key's watch was re-created, or the driver or its client is closed.
func (d *Driver) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	if err := d.begin(ctx); err != nil {
		return nil, d.errs.Wrap(ctx, "subscribe", key, err)
	}
	base := d.base(key)
	w := d.watch(base)
	s := d.fan.Subscribe(base)
	if err := w.waitReady(ctx); err != nil {
		s.Close()
		return nil, d.errs.Wrap(ctx, "subscribe", key, err)
	}
	return s, nil
}

// unsubscribed drops the watch reference of a closed subscription of base.
func (d *Driver) unsubscribed(base string) {
	d.mu.Lock()
	w := d.watches[base]
	d.mu.Unlock()
	if w != nil {
		w.release()
	}
}
