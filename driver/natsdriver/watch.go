package natsdriver

import (
	"context"
	"sync"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
	"github.com/nats-io/nats.go/jetstream"
)

// watchers are the key-value watchers of a Driver's Notifier: one per key
// that has subscribers, started by the first subscription and stopped
// when the last one closes. A watcher is an ordered consumer of the key's
// new messages; every marker (of a release, a purge or an expiry) wakes
// the key's subscribers.
type watchers struct {
	fan    driverkit.Fanout
	mu     sync.Mutex
	keys   map[string]*keyWatch
	closed bool
	wg     sync.WaitGroup // watcher goroutines
	// freed is called with the revision of each marker a watcher sees.
	freed func(key string, seq uint64)
}

// keyWatch is the watcher of one key.
type keyWatch struct {
	ready chan struct{} // closed once w (or err) is set
	w     jetstream.KeyWatcher
	err   error
	stop  chan struct{}
}

func (ws *watchers) init(freed func(key string, seq uint64)) {
	ws.freed = freed
	ws.keys = make(map[string]*keyWatch)
	ws.fan.OnClose = ws.release
}

// Subscribe implements driver.Notifier: it returns once the key's watcher
// listens, so that every release after it is delivered.
func (d *Driver) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	const op = "subscribe"
	if err := d.errs.Begin(ctx, op, key); err != nil {
		return nil, err
	}
	ws := &d.watch
	ws.mu.Lock()
	if ws.closed {
		ws.mu.Unlock()
		return nil, d.errs.Wrap(ctx, op, key, d.closedNow(ctx))
	}
	sub := ws.fan.Subscribe(key)
	kw := ws.keys[key]
	start := kw == nil
	if start {
		kw = &keyWatch{ready: make(chan struct{}), stop: make(chan struct{})}
		ws.keys[key] = kw
	}
	ws.mu.Unlock()
	if start {
		kw.w, kw.err = d.kv.Watch(ctx, encodeKey(key), jetstream.UpdatesOnly())
		if kw.err == nil {
			ws.wg.Add(1)
			go ws.run(key, kw)
		}
		close(kw.ready)
	}
	select {
	case <-kw.ready:
	case <-ctx.Done():
		_ = sub.Close()
		return nil, d.errs.Wrap(ctx, op, key, ctx.Err())
	}
	if kw.err != nil {
		err := kw.err
		_ = sub.Close()
		return nil, d.errs.Wrap(ctx, op, key, err)
	}
	return sub, nil
}

// release stops key's watcher when its last subscription has closed. A
// watcher whose start failed is dropped too, so that the next
// subscription tries again.
func (ws *watchers) release(key string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	kw := ws.keys[key]
	if kw == nil || ws.fan.Count(key) > 0 {
		return
	}
	select {
	case <-kw.ready:
	default:
		return // its starter's subscription will close it, or use it
	}
	delete(ws.keys, key)
	if kw.err == nil {
		close(kw.stop)
	}
}

// run delivers the updates of key's watcher until it is stopped.
func (ws *watchers) run(key string, kw *keyWatch) {
	defer ws.wg.Done()
	updates := kw.w.Updates()
	for {
		select {
		case e, ok := <-updates:
			if !ok {
				ws.fan.Wake(key)
				return
			}
			if e != nil && e.Operation() != jetstream.KeyValuePut {
				ws.freed(key, e.Revision())
				ws.fan.Wake(key)
			}
		case <-kw.stop:
			_ = kw.w.Stop()
			drain(updates)
			return
		}
	}
}

// drain reads what a stopped watcher still delivers, so that nats.go's
// delivery, which blocks on a full channel, can end; it gives up after a
// second.
func drain(updates <-chan jetstream.KeyValueEntry) {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	for {
		select {
		case _, ok := <-updates:
			if !ok {
				return
			}
		case <-t.C:
			return
		}
	}
}

// closeAll stops every watcher, wakes every subscriber (whose next call
// fails) and waits for the watchers' goroutines.
func (ws *watchers) closeAll() {
	ws.mu.Lock()
	if !ws.closed {
		ws.closed = true
		for key, kw := range ws.keys {
			select {
			case <-kw.ready:
				if kw.err == nil {
					close(kw.stop)
				}
				delete(ws.keys, key)
			default:
			}
		}
	}
	ws.mu.Unlock()
	ws.fan.WakeAll()
	ws.wg.Wait()
}
