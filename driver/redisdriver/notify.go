package redisdriver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
	"github.com/redis/go-redis/v9"
)

// hub is the pub/sub connection shared by the open subscriptions of a
// Driver (kept, by key, in the Driver's driverkit.Fanout), with the goroutine
// that reads it. It lives while it has channels,
// and for hubLinger after its last channel goes, so that a process whose
// waits follow one another (the usual shape under contention) does not dial
// a new connection for each.
type hub struct {
	ps    *redis.PubSub
	chans map[string]*chanEntry // by channel name
	waits map[string]*chanEntry // entries awaiting confirmation, by PING payload
	stop  chan struct{}         // closed to end the dispatcher
	done  chan struct{}         // closed when the dispatcher has returned
	idle  *time.Timer           // ends the hub when it has stayed without channels
	gen   uint64                // counts idle periods: a stale idle timer does nothing
	// noteSent is set once a SUBSCRIBE of the driver's own channel
	// (Driver.note) has been written, with the PING of payload notePing;
	// noteOK once that PING's reply has come: from then on, the
	// handoffs published there reach the dispatcher.
	noteSent, noteOK bool
	notePing         string
	// closed is the error of the client's closing (redis.ErrClosed),
	// once the dispatcher has seen it: the dispatcher has returned, and
	// Subscribe fails at once with it.
	closed error
}

// hubLinger is how long a hub without channels keeps its connection. It is
// short so that a program (or a goleak check) that is done with its locks
// sees the goroutine go soon after.
const hubLinger = 200 * time.Millisecond

// chanLinger is how long a channel stays subscribed after its last
// subscription closed. A process that locks a contended key again and
// again subscribes on each wait and closes the subscription on each grant:
// while the channel lingers, the next Subscribe finds it confirmed and
// takes no round trip, and the closing none either (no UNSUBSCRIBE). The
// channel has stayed subscribed throughout, so every release after the new
// Subscribe returns is delivered, as for a fresh one.
const chanLinger = 200 * time.Millisecond

// chanEntry is the channel of one key, subscribed on a hub; the key's
// subscriptions are in the Driver's Fanout.
type chanEntry struct {
	key     string
	name    string
	payload string        // PING payload that confirms the SUBSCRIBE
	ready   chan struct{} // closed when confirmed (err == nil) or failed
	err     error
	idle    *time.Timer // unsubscribes the channel when it has stayed without subscriptions
	gen     uint64      // counts idle periods: a stale idle timer does nothing
}

// Subscribe implements driver.Notifier. It returns once Redis has confirmed
// the subscription to the key's channel: it sends SUBSCRIBE and then PING
// on the shared pub/sub connection and waits for the PING's reply, which
// Redis sends after it has processed the SUBSCRIBE. Every Release of key
// that Redis runs after that is delivered.
//
// When the pub/sub connection breaks, every subscription receives a value
// (a release may have been missed), and again when go-redis has
// resubscribed on a new connection.
func (d *Driver) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	const op = "subscribe"
	if err := ctx.Err(); err != nil {
		return nil, opError(op, key, err)
	}
	h, err := d.lockHub(ctx)
	if err != nil {
		return nil, opError(op, key, err)
	}
	e := d.subscribeChan(ctx, h, key)
	// Under d.mu, so that subClosed counts it.
	s := d.fan.Subscribe(key)
	d.mu.Unlock()

	select {
	case <-e.ready:
	case <-ctx.Done():
		select {
		case <-e.ready: // confirmed too: prefer success
		default:
			_ = s.Close()
			return nil, opError(op, key, context.Cause(ctx))
		}
	}
	if e.err != nil {
		_ = s.Close()
		return nil, opError(op, key, e.err)
	}
	return s, nil
}

// lockHub locks d.mu and returns d's hub, made (and its connection dialled)
// if there is none, and no longer idle. On error d.mu is not held.
func (d *Driver) lockHub(ctx context.Context) (*hub, error) {
	d.mu.Lock()
	if d.hub == nil {
		// Connect outside d.mu, which the other calls take too.
		d.mu.Unlock()
		ps, err := d.dialPubSub(ctx)
		if err != nil {
			return nil, err
		}
		d.mu.Lock()
		if d.hub == nil {
			d.hub = &hub{
				ps:    ps,
				chans: make(map[string]*chanEntry),
				waits: make(map[string]*chanEntry),
				stop:  make(chan struct{}),
				done:  make(chan struct{}),
			}
			go d.dispatch(d.hub)
		} else {
			// Another Subscribe made the hub meanwhile.
			go func() { _ = ps.Close() }()
		}
	}
	h := d.hub
	if h.closed != nil {
		d.mu.Unlock()
		return nil, h.closed
	}
	if h.idle != nil {
		// Reuse the idle hub. If its timer has fired already, the
		// generation check makes it a no-op.
		h.idle.Stop()
		h.idle = nil
		h.gen++
	}
	return h, nil
}

// subscribeChan returns key's channel on h: the lingering one (see
// chanLinger), or a new one whose SUBSCRIBE and PING it sends. d.mu is
// held.
func (d *Driver) subscribeChan(ctx context.Context, h *hub, key string) *chanEntry {
	name := d.channel(key)
	e := h.chans[name]
	if e != nil {
		if e.idle != nil {
			// Reuse the lingering channel.
			e.idle.Stop()
			e.idle = nil
			e.gen++
		}
		return e
	}
	d.seq++
	e = &chanEntry{
		key:     key,
		name:    name,
		payload: "locker-" + strconv.FormatUint(d.seq, 10),
		ready:   make(chan struct{}),
	}
	h.chans[name] = e
	h.waits[e.payload] = e
	// SUBSCRIBE and PING are written under d.mu so that no UNSUBSCRIBE of
	// the same channel can come between them. The hub's first SUBSCRIBE
	// also subscribes the driver's own channel, for the rest of the hub's
	// life.
	chans := []string{name}
	if !h.noteSent {
		chans = append(chans, d.note)
		h.noteSent, h.notePing = true, e.payload
	}
	err := h.ps.Subscribe(ctx, chans...)
	if err == nil {
		err = h.ps.Ping(ctx, e.payload)
	}
	if err != nil {
		h.fail(e, err)
	}
	return e
}

// dialPubSub returns a new PubSub, connected: it sends a PING (whose reply
// the dispatcher ignores) so that dialling happens here, bounded by ctx,
// rather than in the first SUBSCRIBE, which is written under d.mu.
func (d *Driver) dialPubSub(ctx context.Context) (*redis.PubSub, error) {
	// While the stall guard's PING is out, wait for it rather than dial.
	if err := d.guard.wait(ctx); err != nil {
		return nil, err
	}
	// Without channels, Subscribe creates the PubSub without connecting.
	ps := d.direct.Subscribe(context.WithoutCancel(ctx))
	ping := func() (struct{}, error) { return struct{}{}, withCtx(ctx, ps.Ping(ctx, "locker-dial")) }
	var err error
	if d.ctxBound || ctx.Done() == nil {
		_, err = ping()
	} else {
		_, err = bounded(ctx, ping)
	}
	if err != nil {
		d.guard.suspect(ctx, err)
		// Close waits for an abandoned PING to end.
		go func() { _ = ps.Close() }()
		return nil, err
	}
	return ps, nil
}

// fail ends the wait for e's confirmation with err. The channel may stay
// subscribed on the connection until the hub ends; messages for it are
// ignored. d.mu is held.
func (h *hub) fail(e *chanEntry, err error) {
	if h.notePing == e.payload && !h.noteOK {
		// Subscribe the driver's channel again with the next one.
		h.noteSent, h.notePing = false, ""
	}
	if h.chans[e.name] == e {
		delete(h.chans, e.name)
	}
	if h.waits[e.payload] == e {
		delete(h.waits, e.payload)
		e.err = err
		close(e.ready)
	}
}

// subClosed is the Fanout's OnClose: when key has no subscription left,
// its channel lingers (see chanLinger), and endChan unsubscribes it if no
// subscription comes meanwhile.
func (d *Driver) subClosed(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	h := d.hub
	if h == nil || d.fan.Count(key) > 0 {
		return
	}
	e := h.chans[d.channel(key)]
	if e == nil {
		// Failed, and out of the hub already.
		h.idleIfEmpty(d)
		return
	}
	if e.idle == nil {
		gen := e.gen
		e.idle = time.AfterFunc(chanLinger, func() { d.endChan(h, e, gen) })
	}
}

// endChan unsubscribes e's channel if it is still h's and has had no
// subscription since its idle period gen began, and arms the hub's idle
// timer when that was its last channel.
func (d *Driver) endChan(h *hub, e *chanEntry, gen uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e.gen != gen || d.fan.Count(e.key) > 0 || h.chans[e.name] != e {
		return
	}
	e.idle = nil
	delete(h.chans, e.name)
	delete(h.waits, e.payload)
	// The error does not matter: on a broken connection, go-redis
	// forgets the channel and does not resubscribe it.
	_ = h.ps.Unsubscribe(context.Background(), e.name)
	h.idleIfEmpty(d)
}

// idleIfEmpty arms h's idle timer when h is d's hub and has no channel
// left. d.mu is held.
func (h *hub) idleIfEmpty(d *Driver) {
	if len(h.chans) == 0 && d.hub == h && h.idle == nil {
		gen := h.gen
		h.idle = time.AfterFunc(hubLinger, func() { d.endIdle(h, gen) })
	}
}

// endIdle ends h if it is still the driver's hub and has had no channel
// since its idle period gen began.
func (d *Driver) endIdle(h *hub, gen uint64) {
	d.mu.Lock()
	if d.hub != h || h.gen != gen || len(h.chans) > 0 {
		d.mu.Unlock()
		return
	}
	d.hub = nil
	d.mu.Unlock()
	close(h.stop)
	_ = h.ps.Close()
	<-h.done
}

// concerns reports whether a message published on a key's channel must
// wake d's subscriptions to the key: every message does but a handoff
// ("g<token>:<owner>") to an owner that d did not queue, after which only
// that owner can proceed. A handoff to an owner d queued is recorded for
// its next queued TryAcquire. d.mu is held.
func (d *Driver) concerns(payload string) bool {
	q, handoff := d.handoff(payload)
	return !handoff || q != nil
}

// handoff reports whether payload is a handoff ("g<token>:<owner>") and,
// if it is to an owner d queued, returns that owner, with the handoff
// recorded for its next queued TryAcquire. d.mu is held.
func (d *Driver) handoff(payload string) (q *queuedOwner, handoff bool) {
	rest, ok := strings.CutPrefix(payload, "g")
	if !ok {
		return nil, false
	}
	tok, owner, ok := strings.Cut(rest, ":")
	if !ok {
		return nil, false // not ours: wake, and let the waiter ask
	}
	q = d.queued[owner]
	if q == nil {
		return nil, true
	}
	if n, err := strconv.ParseUint(tok, 10, 64); err == nil && n > q.floor {
		q.granted = n
	}
	return q, true
}

// Backoff of the dispatcher while the pub/sub connection fails.
const (
	minBackoff = 20 * time.Millisecond
	maxBackoff = time.Second
)

// dispatch reads h's connection and hands messages to subscriptions until
// h ends.
func (d *Driver) dispatch(h *hub) {
	defer close(h.done)
	bo := driverkit.Backoff{Min: minBackoff, Max: maxBackoff}
	for {
		msg, err := h.ps.Receive(context.Background())
		d.mu.Lock()
		switch {
		case d.hub != h:
			d.mu.Unlock()
			return
		case err != nil && errors.Is(err, redis.ErrClosed):
			d.clientClosed(h, err)
			d.mu.Unlock()
			return
		case err != nil:
			pending := d.broken(h, err)
			d.mu.Unlock()
			if !d.reconfirm(h, pending, err, &bo) {
				return
			}
			continue
		}
		bo.Reset()
		d.deliver(h, msg)
		d.mu.Unlock()
	}
}

// clientClosed handles the closing of the client (the driver's own
// closing of the PubSub sets d.hub first): nothing will come. It wakes
// everyone, whose next call fails, and fails the confirmations in flight.
// d.mu is held.
func (d *Driver) clientClosed(h *hub, err error) {
	h.closed = err
	d.fan.WakeAll()
	for _, e := range h.chans {
		if _, ok := h.waits[e.payload]; ok {
			h.fail(e, err)
		}
	}
}

// broken handles a broken connection (go-redis reconnects and
// resubscribes) or one that cannot be made. A release may have been
// missed: it wakes everyone, and returns the channels whose confirmations
// were in flight, which are lost. d.mu is held.
func (d *Driver) broken(h *hub, err error) (pending []*chanEntry) {
	d.failed(err)
	d.fan.WakeAll()
	for _, e := range h.chans {
		if _, ok := h.waits[e.payload]; ok {
			pending = append(pending, e)
		}
	}
	return pending
}

// reconfirm asks again for the confirmations of pending after the
// connection failed with err, then waits for bo's next delay. It reports
// false when h ends meanwhile.
func (d *Driver) reconfirm(h *hub, pending []*chanEntry, err error, bo *driverkit.Backoff) bool {
	for _, e := range pending {
		if perr := h.ps.Ping(context.Background(), e.payload); perr != nil {
			d.mu.Lock()
			h.fail(e, fmt.Errorf("%w (then %w)", err, perr))
			d.mu.Unlock()
		}
	}
	t := time.NewTimer(bo.Next())
	defer t.Stop()
	select {
	case <-h.stop:
		return false
	case <-t.C:
		return true
	}
}

// deliver hands msg, received on h, to the subscriptions it concerns.
// d.mu is held.
func (d *Driver) deliver(h *hub, msg any) {
	switch m := msg.(type) {
	case *redis.Message:
		if m.Channel == d.note {
			// A handoff to an owner d queued: wake the subscriptions
			// of its key only.
			if q, _ := d.handoff(m.Payload); q != nil {
				d.fan.Wake(q.key)
			}
		} else if e := h.chans[m.Channel]; e != nil && d.concerns(m.Payload) {
			d.fan.Wake(e.key)
		}
	case *redis.Subscription:
		// A subscribe for a confirmed channel is go-redis resubscribing
		// after a reconnect: releases may have been missed in between
		// (on the driver's own channel, handoffs to any key).
		if m.Channel == d.note && m.Kind == "subscribe" && h.noteOK {
			d.fan.WakeAll()
		}
		if e := h.chans[m.Channel]; e != nil && m.Kind == "subscribe" {
			if _, waiting := h.waits[e.payload]; !waiting {
				d.fan.Wake(e.key)
			}
		}
	case *redis.Pong:
		if h.noteSent && m.Payload == h.notePing {
			h.noteOK = true
		}
		if e := h.waits[m.Payload]; e != nil {
			delete(h.waits, m.Payload)
			close(e.ready)
		}
	}
}
