package sqldriver

import (
	"context"
	"crypto/sha256"
	"database/sql"
	sqldrv "database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
	"github.com/jackc/pgx/v5/stdlib"
)

// A listener wakes the waiters of a Driver on PostgreSQL by
// LISTEN/NOTIFY: New gives one to a Driver for a *sql.DB of pgx's stdlib
// driver, and the Driver's Subscribe and Close use it.
//
// Its subscriptions share one connection taken from the pool for LISTEN,
// and one goroutine, both started by the first Subscribe and ended (the
// connection closed, since it carries LISTEN state) one second after the
// last subscription is closed, or at Close; the linger spares a busy lock
// a new connection per wait. When that connection fails, the driver wakes
// every subscriber (a release may have gone unheard), connects again with
// a backoff of up to two seconds, and wakes them once more when it listens
// again. When the *sql.DB is closed (which does not close a connection in
// use), the driver notices within a quarter of a second, closes its LISTEN
// connection, ends its goroutine and wakes every subscriber; Subscribe
// then fails at once with a permanent error wrapping driver.ErrClosed.
type listener struct {
	*Driver

	mu  sync.Mutex
	hub *hub // nil when not listening
}

// linger is how long a hub outlives its last subscription.
const linger = time.Second

// Close stops listening at once (see Driver.Close).
func (d *listener) Close() error {
	d.mu.Lock()
	h := d.hub
	d.hub = nil
	d.mu.Unlock()
	if h != nil {
		h.stop()
	}
	return nil
}

// stopIfIdle stops h if it is still the driver's hub and has no
// subscription.
func (d *listener) stopIfIdle(h *hub) {
	d.mu.Lock()
	h.mu.Lock()
	idle := h.fan.Total() == 0 && d.hub == h
	h.mu.Unlock()
	if idle {
		d.hub = nil
	}
	d.mu.Unlock()
	if idle {
		h.stop()
	}
}

var _ driver.Notifier = (*listener)(nil)

// channel returns the notification channel of the driver's table:
// "locker:" followed by the table name, or by a hash of it when that
// would be longer than PostgreSQL's 63-byte limit.
func (d *Driver) channel() string {
	const prefix = "locker:"
	if len(prefix)+len(d.table) <= 63 {
		return prefix + d.table
	}
	sum := sha256.Sum256([]byte(d.table))
	return prefix + hex.EncodeToString(sum[:16])
}

// hub is the listening connection and the subscriptions of one driver.
type hub struct {
	db      *sql.DB
	channel string
	cancel  context.CancelFunc
	done    chan struct{} // closed when run has returned
	// fan holds the subscriptions; its OnClose (idleLater) starts the
	// linger after the last one.
	fan driverkit.Fanout

	// mu guards the fields below. Subscribe adds to fan, and idleLater
	// reads its Total, under it: the linger starts only once the last
	// subscription is closed, and a Subscribe ends it.
	mu      sync.Mutex
	ready   chan struct{} // closed while LISTEN is in effect
	idle    *time.Timer   // runs stopIfIdle once fan is empty
	watch   *time.Timer   // runs checkClosed every closedCheck; nil once stopped
	stopped bool
}

// idleLater arranges for h to stop after linger when it has no
// subscription left: the OnClose of its Fanout.
func (h *hub) idleLater(d *listener) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.stopped || h.fan.Total() > 0:
	case h.idle == nil:
		h.idle = time.AfterFunc(linger, func() { d.stopIfIdle(h) })
	default:
		h.idle.Reset(linger)
	}
}

// closedCheck is how often a listening driver checks that its *sql.DB is
// still open: closing it does not end a connection in use.
const closedCheck = 250 * time.Millisecond

// checkClosed ends h when its *sql.DB has been closed, and checks again
// later otherwise.
func (h *hub) checkClosed() {
	if dbClosed(h.db) {
		h.cancel()
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.watch != nil {
		h.watch.Reset(closedCheck)
	}
}

// stop ends h's goroutine and waits for it.
func (h *hub) stop() {
	h.mu.Lock()
	h.stopped = true
	if h.idle != nil {
		h.idle.Stop()
	}
	if h.watch != nil {
		h.watch.Stop()
		h.watch = nil
	}
	h.mu.Unlock()
	h.cancel()
	<-h.done
}

// Subscribe implements driver.Notifier for Driver.Subscribe. It returns
// once the driver listens, so that every release after it returns is
// heard.
func (d *listener) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, d.errs.Wrap(ctx, "subscribe", key, err)
	}
	if dbClosed(d.db) {
		return nil, d.errs.Wrap(ctx, "subscribe", key, errDBClosed)
	}
	d.mu.Lock()
	if d.hub == nil {
		hctx, cancel := context.WithCancel(context.Background())
		h := &hub{db: d.db, channel: d.channel(), cancel: cancel, done: make(chan struct{}),
			ready: make(chan struct{})}
		h.fan.OnClose = func(string) { h.idleLater(d) }
		h.watch = time.AfterFunc(closedCheck, h.checkClosed)
		d.hub = h
		go h.run(hctx)
	}
	h := d.hub
	h.mu.Lock()
	s := h.fan.Subscribe(key)
	if h.idle != nil {
		h.idle.Stop()
		h.idle = nil
	}
	ready := h.ready
	h.mu.Unlock()
	d.mu.Unlock()

	t := time.NewTimer(subscribeTimeout)
	defer t.Stop()
	select {
	case <-ready:
		return s, nil
	case <-h.done:
		// The *sql.DB was closed.
		_ = s.Close()
		return nil, d.errs.Wrap(ctx, "subscribe", key, errDBClosed)
	case <-t.C:
		_ = s.Close()
		return nil, d.errs.Wrap(ctx, "subscribe", key, errors.New("no LISTEN connection within "+subscribeTimeout.String()))
	case <-ctx.Done():
		_ = s.Close()
		return nil, d.errs.Wrap(ctx, "subscribe", key, fmt.Errorf("waiting for LISTEN: %w", ctx.Err()))
	}
}

// subscribeTimeout bounds how long Subscribe waits for the listening
// connection; the caller then polls instead.
const subscribeTimeout = 5 * time.Second

// run listens until ctx is done, connecting again after failures.
func (h *hub) run(ctx context.Context) {
	defer close(h.done)
	bo := driverkit.Backoff{Min: 20 * time.Millisecond, Max: 2 * time.Second}
	for {
		listened := h.listen(ctx)
		h.disconnected()
		if ctx.Err() != nil {
			return
		}
		if listened {
			bo.Reset()
		}
		if bo.Wait(ctx) != nil {
			return
		}
	}
}

// listen takes a connection from the pool, listens on it and dispatches
// notifications until it fails or ctx is done. It reports whether LISTEN
// took effect. The connection is always discarded, never returned to the
// pool with LISTEN state.
func (h *hub) listen(ctx context.Context) (listened bool) {
	conn, err := h.db.Conn(ctx)
	if err != nil {
		if dbClosed(h.db) {
			h.cancel()
		}
		return false
	}
	defer conn.Close()
	_ = conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return sqldrv.ErrBadConn
		}
		pc := sc.Conn()
		if _, err := pc.Exec(ctx, "LISTEN "+quoteIdent(h.channel)); err != nil {
			return errors.Join(sqldrv.ErrBadConn, err)
		}
		listened = true
		h.connected()
		for {
			n, err := pc.WaitForNotification(ctx)
			if err != nil {
				return errors.Join(sqldrv.ErrBadConn, err)
			}
			if n.Channel == h.channel {
				h.fan.Wake(n.Payload)
			}
		}
	})
	return listened
}

// quoteIdent quotes a PostgreSQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// connected marks LISTEN in effect and wakes every subscriber: releases
// between a failure and now went unheard.
func (h *hub) connected() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fan.WakeAll() // first: a Subscribe that returns has had its wake-up
	close(h.ready)
}

// disconnected marks LISTEN no longer in effect and wakes every
// subscriber, whose waits then fall back to polling until the driver
// listens again.
func (h *hub) disconnected() {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.ready:
		h.ready = make(chan struct{})
	default:
	}
	h.fan.WakeAll()
}
