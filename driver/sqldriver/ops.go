package sqldriver

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"time"

	"github.com/go-locker/locker/driver"
)

// TryAcquire implements driver.Driver in one short transaction: two round
// trips on PostgreSQL through pgx, five otherwise (see the package
// documentation).
//
// With req.Queued it keeps the owner's place in the key's wait queue too,
// in the same transaction.
func (d *Driver) TryAcquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	return d.acquire(ctx, req, req.Queued)
}

// row is one row of a lock, as read by queries.rows.
type row struct {
	owner   string
	mode    int
	token   int64
	left    sql.NullInt64 // µs left by the database's clock at the statement's start; NULL for an anchor and the clock
	elapsed int64         // µs from the statement's start to the moment the row was read
	limit   int64         // the limit of a counted shared hold or queue entry, or 0
	weight  int64         // its weight, or 0
}

// live reports whether the row had time left when the statement started.
// That is the earlier clock reading, and the safe one: a row that expires
// while the statement waits or reads still counts as live.
func (r *row) live() bool { return r.left.Valid && r.left.Int64 > 0 }

// remaining is the µs the row has left when it was read (never below 0):
// what a refusal reports (LockedError.Remaining) and Inspect shows. The
// statement's clock is read when it starts; the row may be read later,
// after a renewal that committed in between and whose own clock reading,
// and so its expiry, is later than the statement's: left would then
// exceed the holder's TTL by up to the time between the statement's start
// and the read.
func (r *row) remaining() int64 { return max(r.left.Int64-max(r.elapsed, 0), 0) }

// attempt is one acquire, as decide judges it.
type attempt struct {
	key, owner    string
	mode          int   // modeExclusive or modeShared
	us            int64 // TTL in µs
	queued        bool  // Request.Queued
	limit, weight int64 // of a counted request, or 0
	value         []byte
}

// verdict is what acquireTx decided.
type verdict struct {
	token  int64
	locked bool
	left   int64              // µs the holds and queue entries in the way may last, from when they were read
	ahead  string             // a queued attempt refused: the owner just ahead of it (see keyRows.ahead)
	limit  *driver.LimitError // refused: the key's holders have another limit
}

func (d *Driver) acquire(ctx context.Context, req driver.Request, queued bool) (driver.Lease, error) {
	const op = "acquire"
	if err := ctx.Err(); err != nil {
		return driver.Lease{}, d.errs.Wrap(ctx, op, req.Key, err)
	}
	a := attemptOf(req, queued)
	var v verdict
	var err error
	if d.pipeline {
		err = retryRolledBack(func() (err error) {
			v, err = d.acquirePipelined(ctx, a)
			return err
		})
	} else {
		err = retryRolledBack(func() error {
			return d.inTx(ctx, func(tx *sql.Tx) (err error) {
				v, err = d.acquireTx(ctx, tx, a)
				return err
			})
		})
	}
	switch {
	case err != nil:
		return driver.Lease{}, d.errs.Wrap(ctx, op, req.Key, err)
	case v.limit != nil:
		return driver.Lease{}, d.errs.Wrap(ctx, op, req.Key, v.limit)
	case v.locked:
		return driver.Lease{}, d.errs.Wrap(ctx, op, req.Key,
			&driver.LockedError{Remaining: time.Duration(max(v.left, 0)) * time.Microsecond})
	}
	return driver.Lease{
		Key:   req.Key,
		Owner: req.Owner,
		Mode:  req.Mode,
		Token: uint64(v.token),
		TTL:   time.Duration(a.us) * time.Microsecond,
	}, nil
}

// attemptOf returns the attempt of req.
func attemptOf(req driver.Request, queued bool) attempt {
	mode, us := holdArgs(req.Mode, req.TTL)
	a := attempt{key: req.Key, owner: req.Owner, mode: mode, us: us, queued: queued, limit: req.Limit, weight: req.Weight}
	if req.Value != "" {
		a.value = []byte(req.Value) // bytea, varbinary: stored byte for byte
	}
	return a
}

// acquireTx is the transaction of acquire: it serialises with the other
// acquires of key (see queries.lock), reads the lock's rows, and carries
// out what decide makes of them.
func (d *Driver) acquireTx(ctx context.Context, tx querier, a attempt) (verdict, error) {
	if err := d.lockKey(ctx, tx, a.key); err != nil {
		return verdict{}, err
	}
	// Read after the lock, in a statement of its own: its snapshot (READ
	// COMMITTED on PostgreSQL; on MySQL the first consistent read of the
	// transaction) and its clock are taken once the lock is held, so it
	// sees every grant and queue entry committed before.
	rows, err := d.readRows(ctx, tx, a.key)
	if err != nil {
		return verdict{}, err
	}
	v, stmts := d.decide(rows, a)
	for _, st := range stmts {
		res, err := tx.ExecContext(ctx, st.query, st.args...)
		if err != nil {
			return verdict{}, err
		}
		if st.one {
			if n, err := res.RowsAffected(); err != nil || n != 1 {
				return verdict{}, errors.Join(errChanged, err)
			}
		}
	}
	return v, nil
}

// stmt is one statement that carries out an acquire's decision.
type stmt struct {
	query string
	args  []any
	one   bool // must change exactly one row, or the decision is void
}

// decide judges, by the database's clock as the rows report it, whether
// a.owner is granted a.key, extends its own hold, or waits, queued or not,
// or is refused because its limit differs from the key's holders'; it
// returns the verdict and the statements that carry it out, in the
// acquire's transaction.
func (d *Driver) decide(rows []row, a attempt) (verdict, []stmt) {
	k := d.scan(rows, a)
	if k.own != nil {
		// The holder itself: extend, same token, weight and value.
		return verdict{token: k.own.token}, []stmt{d.extend(a, a.mode)}
	}
	stmts := k.purge(d, a)
	if err := k.checkLimit(a); err != nil {
		return verdict{limit: err}, stmts
	}
	if v := k.inTheWay(a); v.locked {
		if !a.queued {
			return v, stmts
		}
		v.ahead = k.ahead(a)
		qmode := a.mode + modeQueuedExclusive - modeExclusive
		if k.mine != nil {
			// Keep the place in the queue; renew the entry.
			return v, append(stmts, d.extend(a, qmode))
		}
		// Join the queue, with an arrival number drawn as tokens are.
		n := nextToken(k.last, k.clock)
		return v, append(stmts, stmt{query: d.q.grant, args: []any{a.key, a.owner, qmode, n, a.us, a.limit, a.weight, nil}})
	}
	// Grant: the next token. The owner's row becomes the hold, whatever it
	// was (a queue entry or an expired hold).
	tok := nextToken(k.last, k.clock)
	return verdict{token: tok}, append(stmts, stmt{query: d.q.grant,
		args: []any{a.key, a.owner, a.mode, tok, a.us, a.limit, a.weight, a.value}})
}

// extend is the statement that renews a.owner's row, in mode.
func (d *Driver) extend(a attempt, mode int) stmt {
	return stmt{query: d.q.extend, args: []any{mode, a.us, a.key, a.owner}, one: true}
}

// keyRows is what decide reads in a key's rows.
type keyRows struct {
	last      int64 // the greatest token among the rows
	clock     int64 // the database's clock, µs since the Unix epoch
	own       *row  // a.owner's live hold in a.mode: a re-acquire
	mine      *row  // the owner's live queue entry
	holds     []*row
	queue     []*row
	dead      bool // expired rows to purge
	deadQueue bool // among them queue entries: the waiters behind may proceed
}

// scan sorts the rows of a key for the attempt a.
func (d *Driver) scan(rows []row, a attempt) keyRows {
	var k keyRows
	for i := range rows {
		r := &rows[i]
		if r.mode == modeClock {
			k.clock = r.token
			continue
		}
		k.last = max(k.last, r.token)
		switch {
		case r.mode == modeAnchor:
			// MySQL's anchor stays: the transaction holds its lock. On
			// PostgreSQL it is the counter row of an older version of
			// the package, which the clock has overtaken: purged.
			k.dead = k.dead || d.dialect == PostgreSQL
		case !r.live():
			k.dead = true
			k.deadQueue = k.deadQueue || r.mode >= modeQueuedExclusive
		case r.mode == modeExclusive || r.mode == modeShared:
			if r.owner == a.owner && r.mode == a.mode {
				k.own = r
				return k
			}
			// Another owner's hold, or the owner's own in the other
			// mode: in the way unless both are shared.
			k.holds = append(k.holds, r)
		case r.mode == modeQueuedExclusive || r.mode == modeQueuedShared:
			k.queue = append(k.queue, r)
			if r.owner == a.owner {
				k.mine = r
			}
		}
	}
	slices.SortFunc(k.queue, func(a, b *row) int { return cmpInt(a.token, b.token) })
	return k
}

// purge returns the statements that remove the expired rows, and wake the
// waiters behind expired queue entries.
func (k *keyRows) purge(d *Driver, a attempt) []stmt {
	if !k.dead {
		return nil
	}
	stmts := []stmt{{query: d.q.purge, args: []any{a.key}}}
	if k.deadQueue && d.q.notify != "" {
		stmts = append(stmts, stmt{query: d.q.notify, args: []any{d.channel(), a.key}})
	}
	return stmts
}

// checkLimit refuses a shared attempt whose limit differs from that of
// a shared holder or waiter (0: uncounted): all must agree on it.
func (k *keyRows) checkLimit(a attempt) *driver.LimitError {
	if a.mode != modeShared {
		return nil
	}
	for _, r := range k.holds {
		if r.mode == modeShared && r.limit != a.limit {
			return &driver.LimitError{Limit: r.limit}
		}
	}
	for _, r := range k.queue {
		if r.mode == modeQueuedShared && r.owner != a.owner && r.limit != a.limit {
			return &driver.LimitError{Limit: r.limit}
		}
	}
	return nil
}

// inTheWay returns the verdict of what blocks the attempt: the holds,
// then the queue entries ahead. A counted request waits for the first of
// them to expire, which may free enough units; any other for the last.
// It is not locked when nothing blocks.
func (k *keyRows) inTheWay(a attempt) verdict {
	var v verdict
	counted := a.limit > 0
	block := func(left int64) {
		switch {
		case !v.locked:
			v.left = left
		case counted:
			v.left = min(v.left, left)
		default:
			v.left = max(v.left, left)
		}
		v.locked = true
	}
	used := int64(0) // units of the shared holds
	conflict := false
	for _, r := range k.holds {
		used += r.weight
		conflict = conflict || a.mode == modeExclusive || r.mode == modeExclusive
	}
	if conflict || (counted && used+a.weight > a.limit) {
		for _, r := range k.holds {
			block(r.remaining())
		}
	}
	// The wait queue: while it has live entries, only its head, or for a
	// shared request a run of shared entries at its head (within the
	// limit, with theirs, for a counted one), may be granted.
	rank := slices.IndexFunc(k.queue, func(r *row) bool { return r.owner == a.owner })
	if len(k.queue) > 0 && !servable(k.queue, rank, a, used) {
		ahead := k.queue
		if rank > 0 {
			ahead = k.queue[:rank]
		}
		for _, r := range ahead {
			block(r.remaining())
		}
	}
	return v
}

// ahead returns the owner just ahead of a queued attempt that is refused:
// the queue entry before a.owner's (its own, or the one it joins at the
// tail), or for the head the one live hold in the way; "" when several
// holds are. MySQL's waiters wait for that owner's bell (see bells).
func (k *keyRows) ahead(a attempt) string {
	before := k.queue
	if i := slices.IndexFunc(k.queue, func(r *row) bool { return r.owner == a.owner }); i >= 0 {
		before = k.queue[:i]
	}
	switch {
	case len(before) > 0:
		return before[len(before)-1].owner
	case len(k.holds) == 1:
		return k.holds[0].owner
	}
	return ""
}

// servable reports whether the wait queue (live entries by arrival) lets
// the attempt of the owner at position rank (-1: not queued) be granted:
// it must be the head or, for a shared request, in the run of shared
// entries at the head, whose weights, with the used units of the holds,
// fit in a counted request's limit, so that a large request is not
// overtaken by small ones.
func servable(queue []*row, rank int, a attempt, used int64) bool {
	switch {
	case rank < 0:
		return false
	case rank == 0:
		return true
	case a.mode != modeShared:
		return false
	}
	units := used + a.weight
	for _, r := range queue[:rank] {
		if r.mode != modeQueuedShared {
			return false
		}
		units += r.weight
	}
	return a.limit == 0 || units <= a.limit
}

// nextToken returns the token of a grant (or the arrival number of a
// queue entry) of a lock whose rows' greatest token is last, at the
// database's clock reading clock (µs since the Unix epoch, read after the
// lock's acquires were serialised): the reading, unless a row already has
// a token as great. A released lock keeps no row, and so no record of its
// tokens: the clock, which has moved past them, stands for them, as long
// as the database's clock does not step back by as much as the time
// between two grants of the key.
func nextToken(last, clock int64) int64 { return max(last+1, clock) }

// lockKey serialises tx with the other acquires of key until it ends
// (see queries.lock).
func (d *Driver) lockKey(ctx context.Context, tx querier, key string) error {
	var arg any = key
	if d.dialect == PostgreSQL {
		arg = lockID(key)
	}
	_, err := tx.ExecContext(ctx, d.q.lock, arg)
	return err
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// readRows reads every row of key.
func (d *Driver) readRows(ctx context.Context, tx querier, key string) ([]row, error) {
	rs, err := tx.QueryContext(ctx, d.q.rows, key)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	return collectRows(rs)
}

// resultRows is the part of *sql.Rows and pgx.Rows that collectRows uses.
type resultRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// collectRows reads the result of queries.rows.
func collectRows(rs resultRows) ([]row, error) {
	var rows []row
	for rs.Next() {
		var r row
		if err := rs.Scan(&r.owner, &r.mode, &r.token, &r.left, &r.elapsed, &r.limit, &r.weight); err != nil {
			return nil, err
		}
		rows = append(rows, r)
	}
	return rows, rs.Err()
}

// errChanged reports a row that changed under a transaction that had read
// it; a retry sees the change.
var errChanged = errors.New("the lease changed concurrently; retry")

// inTx runs f in a transaction and commits it, or rolls it back when f
// fails.
func (d *Driver) inTx(ctx context.Context, f func(tx *sql.Tx) error) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// querier is a *sql.Tx, or a *sql.Conn in a transaction of its own
// (Acquire's, see waiter.try).
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Refresh implements driver.Driver in one statement.
func (d *Driver) Refresh(ctx context.Context, l driver.Lease) (driver.Lease, error) {
	const op = "refresh"
	if err := ctx.Err(); err != nil {
		return driver.Lease{}, d.errs.Wrap(ctx, op, l.Key, err)
	}
	if l.Token == 0 { // no grant's token; 0 would match any in the statement
		return driver.Lease{}, d.errs.Wrap(ctx, op, l.Key, driver.ErrNotHeld)
	}
	mode, us := holdArgs(l.Mode, l.TTL)
	tok := int64(l.Token)
	var err error
	args := []any{us, l.Key, l.Owner, mode, tok, tok}
	if d.dialect == PostgreSQL {
		err = retryRolledBack(func() error { return d.db.QueryRowContext(ctx, d.q.refresh, args...).Scan(&tok) })
	} else {
		err = retryRolledBack(func() error { return d.execOne(ctx, d.q.refresh, args...) })
	}
	if errors.Is(err, sql.ErrNoRows) {
		err = driver.ErrNotHeld
	}
	d.renewed(ctx, l, time.Duration(us)*time.Microsecond, err)
	if err != nil {
		return driver.Lease{}, d.errs.Wrap(ctx, op, l.Key, err)
	}
	l.Token = uint64(tok)
	l.TTL = time.Duration(us) * time.Microsecond
	return l, nil
}

// renewed tells the bell of l, if the driver keeps one (see bells), how
// a renewal for ttl ended: err nil extends it, ErrNotHeld releases it.
func (d *Driver) renewed(ctx context.Context, l driver.Lease, ttl time.Duration, err error) {
	switch {
	case d.bells == nil:
	case err == nil:
		d.bells.renewed(bellKey{l.Key, l.Owner}, ttl)
	case errors.Is(err, driver.ErrNotHeld):
		d.bells.ring(ctx, bellKey{l.Key, l.Owner}, nil)
	}
}

// execOne runs a statement that must change one row, and returns
// sql.ErrNoRows when it changed none.
func (d *Driver) execOne(ctx context.Context, query string, args ...any) error {
	res, err := d.db.ExecContext(ctx, query, args...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err == nil && n == 0 {
		err = sql.ErrNoRows
	}
	return err
}

// Release implements driver.Driver in one statement (two on MySQL when
// the owner holds nothing). With l.Abandoned it releases l.Owner's hold in
// l.Mode whatever its token; either way it removes l.Owner's wait-queue
// entry. On PostgreSQL it notifies the key's waiters when it deleted a
// hold or a queue entry, and with l.Abandoned it first waits for an acquire of the key in progress (see
// releaseSerialised), so that it also removes what an acquire whose
// context ended during its COMMIT leaves behind.
func (d *Driver) Release(ctx context.Context, l driver.Lease) error {
	const op = "release"
	if err := ctx.Err(); err != nil {
		return d.errs.Wrap(ctx, op, l.Key, err)
	}
	tok := int64(l.Token) // 0, any token, in the statements
	switch {
	case l.Abandoned:
		tok = 0
	case tok == 0: // no grant's token
		return d.errs.Wrap(ctx, op, l.Key, driver.ErrNotHeld)
	}
	mode := modeArg(l.Mode)
	var err error
	if d.dialect == PostgreSQL {
		var released bool
		var notified int64
		args := []any{l.Key, l.Owner, mode, tok, tok, d.channel(), l.Key}
		err = retryRolledBack(func() (err error) {
			if tok == 0 {
				released, notified, err = d.releaseSerialised(ctx, l.Key, args)
				return err
			}
			return d.db.QueryRowContext(ctx, d.q.release, args...).Scan(&released, &notified)
		})
		if err == nil && !released {
			err = driver.ErrNotHeld
		}
	} else {
		err = retryRolledBack(func() error { return d.execOne(ctx, d.q.release, l.Key, l.Owner, mode, tok, tok) })
		deleted := err == nil
		if errors.Is(err, sql.ErrNoRows) {
			err = driver.ErrNotHeld
			var n int64
			lerr := retryRolledBack(func() error {
				res, err := d.db.ExecContext(ctx, d.q.leave, l.Key, l.Owner)
				if err == nil {
					n, _ = res.RowsAffected()
				}
				return err
			})
			if lerr != nil {
				err = lerr
			} else if n > 0 {
				deleted = true
			}
		}
		if deleted {
			// The lock's anchor row goes too, so that a released lock
			// keeps no row; the next acquire creates it again. Best
			// effort: the release has happened, and an anchor left
			// behind goes with the key's next release.
			_, _ = d.db.ExecContext(ctx, d.q.unanchor, l.Key)
		}
		if d.bells != nil {
			// The hold is over, or its fate unknown: wake the next
			// waiter, which checks.
			d.bells.ring(ctx, bellKey{l.Key, l.Owner}, nil)
		}
	}
	if err != nil {
		return d.errs.Wrap(ctx, op, l.Key, err)
	}
	return nil
}

// modeArg returns the mode column's value of a hold in m.
func modeArg(m driver.Mode) int {
	if m == driver.Shared {
		return modeShared
	}
	return modeExclusive
}

// holdArgs returns the mode column's value of a hold in m and ttl in whole
// microseconds.
func holdArgs(m driver.Mode, ttl time.Duration) (mode int, us int64) {
	return modeArg(m), ttl.Microseconds()
}
