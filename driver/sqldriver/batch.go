package sqldriver

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
	"github.com/jackc/pgx/v5"
)

// Batch sizes: leases per statement.
const (
	pgBatch    = 1000
	mysqlBatch = 200
)

// leaseID names a row.
type leaseID struct{ name, owner string }

// RefreshBatch implements driver.BatchRefresher: on PostgreSQL through pgx
// one UPDATE statement per 1000 leases, on MySQL one short transaction (a
// locking SELECT and one UPDATE) per 200 leases. On PostgreSQL through
// another database/sql driver it refreshes one lease per statement.
func (d *Driver) RefreshBatch(ctx context.Context, ls []driver.Lease) []error {
	const op = "refresh"
	errs := make([]error, len(ls))
	size := pgBatch
	if d.dialect == MySQL {
		size = mysqlBatch
	}
	for start, end := range driverkit.Chunks(len(ls), size, nil) {
		chunk, cerrs := ls[start:end], errs[start:end]
		if err := ctx.Err(); err != nil {
			for i, l := range chunk {
				cerrs[i] = d.errs.Wrap(ctx, op, l.Key, err)
			}
			continue
		}
		var args batchArgs
		for i, l := range chunk {
			mode, us := holdArgs(l.Mode, l.TTL)
			args.add(i, l, mode, us)
		}
		if len(args.idx) == 0 {
			continue
		}
		if len(chunk) == 1 {
			// One lease: Refresh's single statement.
			_, cerrs[0] = d.Refresh(ctx, chunk[0])
			continue
		}
		var extended map[leaseID]bool
		var err error
		if d.dialect == PostgreSQL && !d.pipeline {
			// Arrays as parameters need pgx: with another driver, one
			// Refresh per lease.
			for _, i := range args.idx {
				_, cerrs[i] = d.Refresh(ctx, chunk[i])
			}
			continue
		}
		if d.dialect == PostgreSQL {
			extended, err = d.batchPG(ctx, &args)
		} else {
			extended, err = d.batchMySQL(ctx, &args)
		}
		for j, i := range args.idx {
			l := chunk[i]
			switch {
			case err != nil:
				cerrs[i] = d.errs.Wrap(ctx, op, l.Key, err)
			case !extended[leaseID{args.names[j], args.owners[j]}]:
				d.renewed(ctx, l, 0, driver.ErrNotHeld)
				cerrs[i] = d.errs.Wrap(ctx, op, l.Key, driver.ErrNotHeld)
			default:
				d.renewed(ctx, l, time.Duration(args.ttls[j])*time.Microsecond, nil)
			}
		}
	}
	return errs
}

// batchArgs are the valid leases of a chunk, column by column.
type batchArgs struct {
	idx    []int // index in the chunk
	names  []string
	owners []string
	modes  []int16
	tokens []int64
	ttls   []int64
}

func (a *batchArgs) add(i int, l driver.Lease, mode int, us int64) {
	a.idx = append(a.idx, i)
	a.names = append(a.names, l.Key)
	a.owners = append(a.owners, l.Owner)
	a.modes = append(a.modes, int16(mode))
	a.tokens = append(a.tokens, int64(l.Token))
	a.ttls = append(a.ttls, us)
}

// batchPG extends the live leases of a in one statement and returns those
// it extended.
func (d *Driver) batchPG(ctx context.Context, a *batchArgs) (map[leaseID]bool, error) {
	// The unnamed statement of QueryExecModeExec is planned for these
	// arrays each time; a cached generic plan, made with the statistics
	// of a smaller table, was seen to scan the table once per lease.
	rs, err := d.db.QueryContext(ctx, d.q.batch, pgx.QueryExecModeExec, a.names, a.owners, a.modes, a.tokens, a.ttls)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	extended := make(map[leaseID]bool, len(a.idx))
	for rs.Next() {
		var id leaseID
		if err := rs.Scan(&id.name, &id.owner); err != nil {
			return nil, err
		}
		extended[id] = true
	}
	return extended, rs.Err()
}

// batchMySQL extends the live leases of a in one transaction: it locks and
// reads their rows, then extends those that are held as the leases say.
func (d *Driver) batchMySQL(ctx context.Context, a *batchArgs) (map[leaseID]bool, error) {
	var ids []any
	for j := range a.idx {
		ids = append(ids, a.names[j], a.owners[j])
	}
	in := rowsIn(len(a.idx))
	extended := make(map[leaseID]bool, len(a.idx))
	err := retryRolledBack(func() error { return d.batchTx(ctx, a, ids, in, extended) })
	return extended, err
}

// batchTx is one try of batchMySQL's transaction; it fills extended.
func (d *Driver) batchTx(ctx context.Context, a *batchArgs, ids []any, in string, extended map[leaseID]bool) error {
	return d.inTx(ctx, func(tx *sql.Tx) error {
		clear(extended)
		rs, err := tx.QueryContext(ctx, "SELECT name, owner, mode, token, TIMESTAMPDIFF(MICROSECOND, "+d.q.now+", expires) FROM "+
			d.q.table+" FORCE INDEX (PRIMARY) WHERE "+in+" FOR UPDATE", ids...)
		if err != nil {
			return err
		}
		held := make(map[leaseID]row)
		for rs.Next() {
			var id leaseID
			var r row
			if err := rs.Scan(&id.name, &id.owner, &r.mode, &r.token, &r.left); err != nil {
				rs.Close()
				return err
			}
			if r.live() {
				held[id] = r
			}
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return err
		}
		var set strings.Builder
		var args, keep []any
		for j := range a.idx {
			id := leaseID{a.names[j], a.owners[j]}
			r, ok := held[id]
			if !ok || r.mode != int(a.modes[j]) || (a.tokens[j] != 0 && a.tokens[j] != r.token) || extended[id] {
				continue
			}
			extended[id] = true
			set.WriteString(" WHEN name = ? AND owner = ? THEN " + d.q.now + " + INTERVAL ? MICROSECOND")
			args = append(args, id.name, id.owner, a.ttls[j])
			keep = append(keep, id.name, id.owner)
		}
		if len(keep) == 0 {
			return nil
		}
		_, err = tx.ExecContext(ctx, "UPDATE "+d.q.table+" FORCE INDEX (PRIMARY) SET expires = CASE"+set.String()+" ELSE expires END WHERE "+rowsIn(len(keep)/2),
			append(args, keep...)...)
		return err
	})
}

// rowsIn returns the condition "(name = ? AND owner = ?) OR …" for n
// rows. With FORCE INDEX (PRIMARY) it is a set of primary-key lookups,
// which lock those rows only: a scan would lock every row it reads and
// deadlock with the acquires of other keys.
func rowsIn(n int) string {
	return strings.TrimSuffix(strings.Repeat("(name = ? AND owner = ?) OR ", n), " OR ")
}
