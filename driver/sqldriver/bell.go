package sqldriver

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
)

// Bells wake MySQL waiters without polling (see Waiting in the package
// documentation). The bell of a key is a MySQL user-level lock
// (GET_LOCK) named after a hash of the database, table and key. It is
// only a wake-up: the lease rows stay the truth, and every grant is still
// decided by an acquire's transaction.
//
// A waiter (Acquire) blocks in GET_LOCK on the key's bell on a connection
// of its own. An exclusive holder that was granted the key by Acquire
// keeps the bell on that connection for as long as it holds the key, and
// its Release (or Refresh learning that the hold is gone, or the end of
// the hold's TTL without a renewal) releases it, which wakes exactly one
// waiter, the first in the server's line for the lock. A holder that
// dies drops its connection, and the server releases its bell with it.
//
// A waiter that gets the bell while the key is still held (by an owner
// granted without Acquire, by a shared holder, by one whose bell was
// lost) keeps it and polls, with a backoff capped by the hold's
// remaining lease: the only waiter of the key that polls. One that gets
// it while only queue entries ahead of it are in the way passes it on.
type bells struct {
	mu sync.Mutex
	m  map[bellKey]*bell
	ns string // the namespace of the driver's bells; "" until known
}

type bellKey struct{ key, owner string }

// bell is the bell a holder keeps: the connection that holds it, and the
// timer that releases it when the hold's TTL runs out without a renewal.
type bell struct {
	conn  *sql.Conn
	timer *time.Timer
}

// bellWaitMax caps the backoff of the waiter that polls while it holds
// the bell.
const bellWaitMax = 50 * time.Millisecond

// bellName returns the name of key's bell: "locker:" and 32 hex digits of
// a SHA-256 of the namespace (the database and table) and the key, within
// MySQL's 64-character limit on lock names. Lock names are the server's,
// shared by every database on it.
func (d *Driver) bellName(ctx context.Context, key string) (string, error) {
	b := d.bells
	b.mu.Lock()
	ns := b.ns
	b.mu.Unlock()
	if ns == "" {
		ns = d.table
		if !strings.Contains(ns, ".") {
			var db sql.NullString
			if err := d.db.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&db); err != nil {
				return "", err
			}
			ns = db.String + "." + ns
		}
		b.mu.Lock()
		b.ns = ns
		b.mu.Unlock()
	}
	sum := sha256.Sum256([]byte(ns + "\x00" + key))
	return "locker:" + hex.EncodeToString(sum[:16]), nil
}

// Acquire implements driver.Acquirer on MySQL (made by New without
// Options.NoNotify): it waits for req.Key in the key's wait queue
// (Request.Queued), woken by the key's bell rather than by polling, and
// returns the grant with Lease.Start set. Elsewhere it fails with a
// permanent error wrapping errors.ErrUnsupported.
//
// It takes one connection from the pool for as long as it waits, and an
// exclusive grant keeps it, with the bell, until Release. It returns by
// ctx's deadline: a connection whose wait ctx ended is closed, which
// releases anything the session held.
func (d *Driver) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	const op = "acquire"
	if d.bells == nil {
		return driver.Lease{}, driver.Permanent(d.opError(op, req.Key,
			fmt.Errorf("waiting by GET_LOCK (MySQL, without Options.NoNotify): %w", errors.ErrUnsupported)))
	}
	if err := ctx.Err(); err != nil {
		return driver.Lease{}, d.opError(op, req.Key, err)
	}
	a, err := checkRequest(req, true)
	if err != nil {
		return driver.Lease{}, d.opError(op, req.Key, err)
	}
	name, err := d.bellName(ctx, req.Key)
	if err != nil {
		return driver.Lease{}, d.opError(op, req.Key, err)
	}
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return driver.Lease{}, d.opError(op, req.Key, err)
	}
	// Closing the *sql.DB does not end a connection in use: the wait
	// checks, as a listener does, and ends when it is closed.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := watchClosed(d.db, cancel)
	w := &waiter{d: d, conn: conn, name: name, a: a}
	l, err := w.wait(wctx, req)
	stop()
	if err != nil {
		discard(conn) // whatever its session held goes with it
		_ = conn.Close()
		if cerr := ctx.Err(); cerr != nil {
			if !errors.Is(err, cerr) {
				err = fmt.Errorf("%w: %w", cerr, err)
			}
			// The caller gives up: its queue entry goes now rather than
			// when the front-end's cleanup comes. Only then: after any
			// other error the front-end may attempt again with the same
			// owner, and a late Release would take its grant.
			go d.leave(req)
		}
		return driver.Lease{}, d.opError(op, req.Key, err)
	}
	return l, nil
}

// leave removes, after an Acquire that failed, what it may have left for
// req.Owner: its queue entry, a grant whose reply was lost.
func (d *Driver) leave(req driver.Request) {
	ctx, cancel := context.WithTimeout(context.Background(), ringTimeout)
	defer cancel()
	_ = d.Release(ctx, driver.Lease{Key: req.Key, Owner: req.Owner, Mode: req.Mode})
}

// waiter is one Acquire call: its connection, and whether that
// connection's session holds the key's bell.
type waiter struct {
	d    *Driver
	conn *sql.Conn
	name string
	a    attempt
	held bool // the session holds the bell
}

// wait attempts, and waits for the bell between attempts, until req is
// granted or ctx is done.
func (w *waiter) wait(ctx context.Context, req driver.Request) (driver.Lease, error) {
	bo := driverkit.Backoff{Min: time.Millisecond, Max: bellWaitMax}
	passed := false
	for {
		sent := time.Now()
		v, err := w.try(ctx)
		switch {
		case err != nil:
			return driver.Lease{}, err
		case v.limit != nil:
			w.giveBack(ctx)
			return driver.Lease{}, v.limit
		case !v.locked:
			return w.granted(ctx, req, v, sent)
		}
		// Wait at most until the holds and entries in the way may
		// expire, and renew the queue entry within its TTL.
		wait := min(time.Duration(v.left)*time.Microsecond+time.Millisecond, time.Duration(w.a.us)*time.Microsecond/3)
		if w.held && v.held {
			// The holder has no bell: poll, the key's only waiter that
			// does.
			if err := sleep(ctx, min(bo.Next(), wait)); err != nil {
				return driver.Lease{}, err
			}
			continue
		}
		if w.held {
			// Only queue entries ahead: pass the bell on to them, and
			// back off if it comes straight back.
			if err := w.release(ctx); err != nil {
				return driver.Lease{}, err
			}
			if passed {
				if err := sleep(ctx, min(bo.Next(), wait)); err != nil {
					return driver.Lease{}, err
				}
			}
			passed = true
		}
		if err := w.listen(ctx, wait); err != nil {
			return driver.Lease{}, err
		}
	}
}

// try makes one queued attempt on the waiter's connection, in a
// transaction of BEGIN and COMMIT statements rather than a *sql.Tx:
// database/sql rolls back a Tx whose context ends between two statements
// without a deadline, and holds the connection, which Acquire then could
// not close by its deadline. A failed attempt leaves its transaction to
// the session, which Acquire closes; only a deadlock, which rolls the
// whole transaction back, is attempted again on the same connection.
func (w *waiter) try(ctx context.Context) (v verdict, err error) {
	err = retryRolledBack(func() error {
		if _, err := w.conn.ExecContext(ctx, "BEGIN"); err != nil {
			return err
		}
		if v, err = w.d.acquireTx(ctx, w.conn, w.a); err != nil {
			return err
		}
		_, err := w.conn.ExecContext(ctx, "COMMIT")
		return err
	})
	return v, err
}

// listen waits in GET_LOCK for the bell, at most wait.
func (w *waiter) listen(ctx context.Context, wait time.Duration) error {
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl))
	}
	var got sql.NullInt64
	err := w.conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", w.name, max(wait, 0).Seconds()).Scan(&got)
	if err != nil {
		return err
	}
	w.held = got.Int64 == 1
	return ctx.Err()
}

// release gives up the bell, which wakes the next waiter.
func (w *waiter) release(ctx context.Context) error {
	var n sql.NullInt64
	if err := w.conn.QueryRowContext(ctx, "SELECT RELEASE_ALL_LOCKS()").Scan(&n); err != nil {
		return err
	}
	if n.Int64 != 1 {
		return fmt.Errorf("bell: released %d user locks, want 1", n.Int64)
	}
	w.held = false
	return nil
}

// giveBack releases the bell if the waiter holds it and returns the
// connection to the pool, or closes it when that fails.
func (w *waiter) giveBack(ctx context.Context) {
	if w.held && w.release(ctx) != nil {
		discard(w.conn)
	}
	_ = w.conn.Close()
}

// granted returns the lease of a grant whose attempt was sent at sent. An
// exclusive holder keeps the bell, if the waiter holds it, until its
// release; otherwise the waiter gives it back, and so wakes the next
// waiter (a shared request that may be granted beside this one).
func (w *waiter) granted(ctx context.Context, req driver.Request, v verdict, sent time.Time) (driver.Lease, error) {
	ttl := time.Duration(w.a.us) * time.Microsecond
	l := driver.Lease{Key: req.Key, Owner: req.Owner, Mode: req.Mode, Token: uint64(v.token), TTL: ttl, Start: sent}
	if !w.held && req.Mode == driver.Exclusive {
		// Granted without waiting for the bell: take it if it is free,
		// so that the next waiter is woken rather than polls.
		var got sql.NullInt64
		if err := w.conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", w.name).Scan(&got); err != nil {
			discard(w.conn) // the session may hold it: it goes
		}
		w.held = got.Int64 == 1
	}
	if !w.held || req.Mode != driver.Exclusive {
		w.giveBack(ctx)
		return l, nil
	}
	w.d.bells.keep(bellKey{req.Key, req.Owner}, w.conn, ttl-time.Since(sent))
	return l, nil
}

// keep records the bell a holder keeps on conn, released after ttl
// unless a renewal extends it.
func (b *bells) keep(k bellKey, conn *sql.Conn, ttl time.Duration) {
	bl := &bell{conn: conn}
	b.mu.Lock()
	if b.m == nil {
		b.m = map[bellKey]*bell{}
	}
	old := b.m[k]
	b.m[k] = bl
	bl.timer = time.AfterFunc(max(ttl, 0), func() { b.expired(k, bl) })
	b.mu.Unlock()
	if old != nil {
		// Cannot happen (an owner is granted once); never leak a session.
		old.timer.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), ringTimeout)
		defer cancel()
		old.ring(ctx)
	}
}

// expired releases bl, the bell of k, when the hold's TTL has run out
// without a renewal: a hold that is over must not keep its waiters
// asleep.
func (b *bells) expired(k bellKey, bl *bell) {
	ctx, cancel := context.WithTimeout(context.Background(), ringTimeout)
	defer cancel()
	b.ring(ctx, k, bl)
}

// ringTimeout bounds the release of a bell that no call asked for.
const ringTimeout = 5 * time.Second

// renewed moves the release of the bell of k, if any, to ttl from now.
func (b *bells) renewed(k bellKey, ttl time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if bl := b.m[k]; bl != nil {
		bl.timer.Reset(ttl)
	}
}

// ring releases the bell of k, if this driver keeps it (when bl is not
// nil, only if it is bl), which wakes the key's next waiter.
func (b *bells) ring(ctx context.Context, k bellKey, bl *bell) {
	b.mu.Lock()
	cur := b.m[k]
	if cur == nil || (bl != nil && cur != bl) {
		b.mu.Unlock()
		return
	}
	delete(b.m, k)
	b.mu.Unlock()
	cur.timer.Stop()
	cur.ring(ctx)
}

// ring releases the bell and returns its connection to the pool, or, when
// the release fails, closes the connection, which ends its session and so
// releases the bell.
func (bl *bell) ring(ctx context.Context) {
	var n sql.NullInt64
	err := bl.conn.QueryRowContext(ctx, "SELECT RELEASE_ALL_LOCKS()").Scan(&n)
	if err != nil || n.Int64 != 1 {
		discard(bl.conn)
	}
	_ = bl.conn.Close()
}

// watchClosed calls cancel once db is closed, checking every
// closedCheck, until stop is called.
func watchClosed(db *sql.DB, cancel func()) (stop func()) {
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	check := func() {
		if dbClosed(db) {
			cancel()
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			t.Reset(closedCheck)
		}
	}
	mu.Lock()
	t = time.AfterFunc(closedCheck, check)
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
