package sqldriver

import (
	"cmp"
	"context"
	"database/sql"
	"slices"
	"time"

	"github.com/go-locker/locker/driver"
)

var _ driver.Inspector = (*Driver)(nil)

// Inspect implements driver.Inspector with one read of the lock's rows:
// the live holds (with the time they have left by the database's clock),
// the highest token among the key's rows (Fence: no counter is kept once a
// key is released, so a free key's Fence is 0) and the live wait-queue
// entries (Waiting).
func (d *Driver) Inspect(ctx context.Context, key string) (driver.KeyState, error) {
	const op = "inspect"
	if err := ctx.Err(); err != nil {
		return driver.KeyState{}, d.opError(op, key, err)
	}
	var st driver.KeyState
	err := retryEnded(func() error {
		st = driver.KeyState{}
		rows, err := d.db.QueryContext(ctx, d.q.rows, key)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var owner string
			var mode int
			var token int64
			var left sql.NullInt64
			if err := rows.Scan(&owner, &mode, &token, &left); err != nil {
				return err
			}
			if mode != modeClock {
				// No counter is kept: the highest token of the
				// key's rows is the last one handed out.
				st.Fence = max(st.Fence, uint64(max(token, 0)))
			}
			switch {
			case mode == modeClock || mode == modeAnchor:
			case !left.Valid || left.Int64 <= 0:
				// expired: the next acquire deletes it
			case mode == modeExclusive || mode == modeShared:
				st.Mode = driver.Exclusive
				if mode == modeShared {
					st.Mode = driver.Shared
				}
				st.Holders = append(st.Holders, driver.Holder{Owner: owner, Token: uint64(max(token, 0)),
					Remaining: time.Duration(left.Int64) * time.Microsecond})
			case mode == modeQueuedExclusive || mode == modeQueuedShared:
				st.Waiting++
			}
		}
		return rows.Err()
	})
	if err != nil {
		return driver.KeyState{}, d.opError(op, key, err)
	}
	slices.SortFunc(st.Holders, func(a, b driver.Holder) int { return cmp.Compare(a.Token, b.Token) })
	return st, nil
}

// ForceRelease implements driver.Inspector: one DELETE of the lock's live
// holds, whatever their owner, then, on PostgreSQL when it deleted any, a
// NOTIFY that wakes the waiters (a NotifyDriver's subscribers). The wait
// queue is kept.
func (d *Driver) ForceRelease(ctx context.Context, key string) (int, error) {
	const op = "force-release"
	if err := ctx.Err(); err != nil {
		return 0, d.opError(op, key, err)
	}
	del := "DELETE FROM " + d.q.table + " WHERE name = ? AND mode IN (1, 2) AND expires > " + d.q.now
	if d.dialect == PostgreSQL {
		del = numbered(del)
	}
	var n int64
	err := retryEnded(func() error {
		res, err := d.db.ExecContext(ctx, del, key)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, d.opError(op, key, err)
	}
	if n > 0 && d.dialect == PostgreSQL {
		if _, err := d.db.ExecContext(ctx, d.q.notify, d.channel(), key); err != nil {
			return int(n), d.opError(op, key, err)
		}
	}
	return int(n), nil
}
