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
// documentation). The bell of an owner of a key is a MySQL user-level
// lock (GET_LOCK) named after a hash of the database, table, key and
// owner. It is only a wake-up: the lease rows stay the truth, and every
// grant is still decided by an acquire's transaction.
//
// A waiter (Acquire) takes its own bell on a connection of its own before
// it joins the key's wait queue, and keeps it while it waits. Refused, it
// blocks in GET_LOCK on the bell of the owner just ahead of it in the
// queue (or, at the head, of the holder): that owner's release, or its
// end, wakes exactly this waiter, in the queue's order. An exclusive
// holder granted by Acquire keeps its bell on that connection for as long
// as it holds the key, and its Release (or Refresh learning that the hold
// is gone, or the end of the hold's TTL without a renewal) releases it. A
// holder or waiter that dies drops its connection, and the server
// releases its bell with it.
//
// A waiter whose bell of the owner ahead is free while that owner is
// still ahead (a holder granted without Acquire, readers, an owner whose
// bell was lost) polls, with a backoff capped by the hold's remaining
// lease: only the queue's head can meet a holder, so at most one waiter
// of a key polls.
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

// bellWaitMax caps the backoff of the waiter that polls.
const bellWaitMax = 50 * time.Millisecond

// bellName returns the name of the bell of owner for key: "locker:" and 32
// hex digits of a SHA-256 of the namespace (the database and table), the
// key and the owner, within MySQL's 64-character limit on lock names.
// Lock names are the server's, shared by every database on it.
func (d *Driver) bellName(ctx context.Context, key, owner string) (string, error) {
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
	sum := sha256.Sum256([]byte(ns + "\x00" + key + "\x00" + owner))
	return "locker:" + hex.EncodeToString(sum[:16]), nil
}

// Acquire implements driver.Acquirer on MySQL (made by New without
// Options.NoNotify): it waits for req.Key in the key's wait queue
// (Request.Queued), woken by the bell of the owner ahead of it rather than
// by polling, and returns the grant with Lease.Start set. Elsewhere it
// fails with a permanent error wrapping errors.ErrUnsupported.
//
// It takes one connection from the pool for as long as it waits, and an
// exclusive grant keeps it, with the owner's bell, until Release. It
// returns by ctx's deadline: a connection whose wait ctx ended is closed,
// which releases anything the session held, and the owner's queue entry
// is then deleted in the background.
func (d *Driver) Acquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	const op = "acquire"
	if d.bells == nil {
		return driver.Lease{}, d.errs.Wrap(ctx, op, req.Key,
			driver.Permanent(fmt.Errorf("waiting by GET_LOCK (MySQL, without Options.NoNotify): %w", errors.ErrUnsupported)))
	}
	if err := ctx.Err(); err != nil {
		return driver.Lease{}, d.errs.Wrap(ctx, op, req.Key, err)
	}
	a := attemptOf(req, true)
	name, err := d.bellName(ctx, req.Key, req.Owner)
	if err != nil {
		return driver.Lease{}, d.errs.Wrap(ctx, op, req.Key, err)
	}
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return driver.Lease{}, d.errs.Wrap(ctx, op, req.Key, err)
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
		return driver.Lease{}, d.errs.Wrap(ctx, op, req.Key, err)
	}
	return l, nil
}

// leave removes, after an Acquire that failed, what it may have left for
// req.Owner: its queue entry, a grant whose reply was lost.
func (d *Driver) leave(req driver.Request) {
	ctx, cancel := context.WithTimeout(context.Background(), ringTimeout)
	defer cancel()
	_ = d.Release(ctx, driver.Lease{Key: req.Key, Owner: req.Owner, Mode: req.Mode, Abandoned: true})
}

// waiter is one Acquire call: its connection, and whether that
// connection's session holds the owner's bell.
type waiter struct {
	d    *Driver
	conn *sql.Conn
	name string // the owner's bell
	a    attempt
	held bool // the session holds the owner's bell
}

// wait takes the owner's bell, then attempts, and waits for the bell of
// the owner ahead between attempts, until req is granted or ctx is done.
func (w *waiter) wait(ctx context.Context, req driver.Request) (driver.Lease, error) {
	var got sql.NullInt64
	if err := w.conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", w.name).Scan(&got); err != nil {
		return driver.Lease{}, err
	}
	// Not granted only when this owner's bell is kept already, by its
	// hold in this driver: the wait goes on without.
	w.held = got.Int64 == 1
	bo := driverkit.Backoff{Min: time.Millisecond, Max: bellWaitMax}
	woke := "" // the owner whose bell was found free last
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
		if v.ahead == "" || v.ahead == woke {
			// Several holds ahead, or the owner ahead has no bell:
			// poll, as only the queue's head can.
			if err := sleep(ctx, min(bo.Next(), wait)); err != nil {
				return driver.Lease{}, err
			}
			continue
		}
		bo.Reset()
		rang, err := w.listen(ctx, v.ahead, wait)
		if err != nil {
			return driver.Lease{}, err
		}
		if rang {
			woke = v.ahead
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

// listen waits in GET_LOCK, at most wait, for the bell of owner, the one
// ahead, and releases it at once in the same statement: it reports
// whether the bell was free (rang, or never held).
func (w *waiter) listen(ctx context.Context, owner string, wait time.Duration) (rang bool, err error) {
	name, err := w.d.bellName(ctx, w.a.key, owner)
	if err != nil {
		return false, err
	}
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl))
	}
	var got, released sql.NullInt64
	err = w.conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?), RELEASE_LOCK(?)", name, max(wait, 0).Seconds(), name).
		Scan(&got, &released)
	if err != nil {
		return false, err
	}
	return got.Int64 == 1, ctx.Err()
}

// release gives up the session's user locks: the owner's bell, which
// wakes the waiter behind it. Any other count than expected is an error.
func (w *waiter) release(ctx context.Context) error {
	var n sql.NullInt64
	if err := w.conn.QueryRowContext(ctx, "SELECT RELEASE_ALL_LOCKS()").Scan(&n); err != nil {
		return err
	}
	want := int64(0)
	if w.held {
		want = 1
	}
	if n.Int64 != want {
		return fmt.Errorf("bell: released %d user locks, want %d", n.Int64, want)
	}
	w.held = false
	return nil
}

// giveBack releases the bell if the waiter holds it and returns the
// connection to the pool, or closes it when that fails.
func (w *waiter) giveBack(ctx context.Context) {
	if w.release(ctx) != nil {
		discard(w.conn)
	}
	_ = w.conn.Close()
}

// granted returns the lease of a grant whose attempt was sent at sent. An
// exclusive holder keeps the owner's bell until its release; a shared
// one gives it back, and so wakes the waiter behind it, which may be a
// reader granted beside it.
func (w *waiter) granted(ctx context.Context, req driver.Request, v verdict, sent time.Time) (driver.Lease, error) {
	ttl := time.Duration(w.a.us) * time.Microsecond
	l := driver.Lease{Key: req.Key, Owner: req.Owner, Mode: req.Mode, Token: uint64(v.token), TTL: ttl, Start: sent}
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
