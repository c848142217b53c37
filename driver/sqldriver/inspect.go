package sqldriver

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/go-locker/locker/driver"
)

var _ driver.Inspector = (*Driver)(nil)

// Inspect implements driver.Inspector with one read of the lock's rows:
// the live holds (with the time they have left by the database's clock,
// their weights and values, and the limit of counted ones),
// the highest token among the key's rows (Fence: no counter is kept once a
// key is released, so a free key's Fence is 0) and the live wait-queue
// entries (Waiting).
func (d *Driver) Inspect(ctx context.Context, key string) (driver.KeyState, error) {
	const op = "inspect"
	if err := ctx.Err(); err != nil {
		return driver.KeyState{}, d.errs.Wrap(ctx, op, key, err)
	}
	var st driver.KeyState
	err := retryRolledBack(func() error {
		st = driver.KeyState{}
		rows, err := d.db.QueryContext(ctx, d.q.state, key)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r row
			var value []byte
			if err := rows.Scan(&r.owner, &r.mode, &r.token, &r.left, &r.elapsed, &r.limit, &r.weight, &value); err != nil {
				return err
			}
			// No counter is kept: the highest token of the key's rows
			// is the last one handed out.
			st.Fence = max(st.Fence, uint64(max(r.token, 0)))
			switch {
			case r.mode == modeAnchor:
			case !r.live():
				// expired: the next acquire deletes it
			case r.mode == modeExclusive || r.mode == modeShared:
				st.Mode = driver.Exclusive
				if r.mode == modeShared {
					st.Mode = driver.Shared
					st.Limit = r.limit
				}
				st.Holders = append(st.Holders, driver.Holder{Owner: r.owner, Token: uint64(max(r.token, 0)),
					Remaining: time.Duration(r.remaining()) * time.Microsecond, Weight: r.weight, Value: string(value)})
			case r.mode == modeQueuedExclusive || r.mode == modeQueuedShared:
				st.Waiting++
			}
		}
		return rows.Err()
	})
	if err != nil {
		return driver.KeyState{}, d.errs.Wrap(ctx, op, key, err)
	}
	slices.SortFunc(st.Holders, func(a, b driver.Holder) int { return cmp.Compare(a.Token, b.Token) })
	return st, nil
}

// ForceRelease implements driver.Inspector: one DELETE of the lock's live
// holds, whatever their owner, then, on PostgreSQL when it deleted any, a
// NOTIFY that wakes the waiters (a notifying Driver's subscribers). The wait
// queue is kept.
func (d *Driver) ForceRelease(ctx context.Context, key string) (int, error) {
	const op = "force-release"
	if err := ctx.Err(); err != nil {
		return 0, d.errs.Wrap(ctx, op, key, err)
	}
	del := "DELETE FROM " + d.q.table + " WHERE name = ? AND mode IN (1, 2) AND expires > " + d.q.now
	if d.dialect == PostgreSQL {
		del = numbered(del)
	}
	var n int64
	err := retryRolledBack(func() error {
		res, err := d.db.ExecContext(ctx, del, key)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, d.errs.Wrap(ctx, op, key, err)
	}
	if n > 0 && d.dialect == PostgreSQL {
		if _, err := d.db.ExecContext(ctx, d.q.notify, d.channel(), key); err != nil {
			return int(n), d.errs.Wrap(ctx, op, key, err)
		}
	}
	return int(n), nil
}
