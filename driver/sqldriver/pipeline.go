package sqldriver

import (
	"context"
	"database/sql"
	sqldrv "database/sql/driver"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// acquirePipelined is acquire's transaction on PostgreSQL through pgx, in
// two round trips instead of five: BEGIN, the advisory lock and the read
// go out in one pipeline, and the statements that decide returns go out
// with the COMMIT in a second one. The statements are the same as
// acquireTx's, and run in the same order; each still has a snapshot of its
// own, taken when the server starts it, so the read sees every commit made
// before the lock was granted. Their statement_timestamp() may not be
// their own: with pgx's simple protocol the first pipeline is one message,
// whose receipt, before the lock wait, is the clock of all three; the
// token's clock is therefore clock_timestamp() (see queries.rows).
//
// A connection on which anything failed is discarded (see onPgxConn).
func (d *Driver) acquirePipelined(ctx context.Context, a attempt) (v verdict, err error) {
	err = d.onPgxConn(ctx, func(pc *pgx.Conn) (err error) {
		v, err = d.pipelined(ctx, pc, a)
		return err
	})
	return v, err
}

// onPgxConn runs f on a pooled connection of pgx's stdlib driver. When f
// fails the connection is discarded, never returned to the pool with a
// transaction or a batch still open.
func (d *Driver) onPgxConn(ctx context.Context, f func(pc *pgx.Conn) error) error {
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var opErr error
	rawErr := conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			opErr = fmt.Errorf("connection %T is not pgx's", dc)
			return nil
		}
		if opErr = f(sc.Conn()); opErr != nil {
			return sqldrv.ErrBadConn
		}
		return nil
	})
	if opErr != nil {
		return opErr
	}
	return rawErr
}

func (d *Driver) pipelined(ctx context.Context, pc *pgx.Conn, a attempt) (verdict, error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(d.q.lock, lockID(a.key))
	b.Queue(d.q.rows, a.key)
	br := pc.SendBatch(ctx, b)
	var rows []row
	_, err := br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil {
		rows, err = scanRows(br)
	}
	if err = errors.Join(err, br.Close()); err != nil {
		return verdict{}, err
	}

	v, stmts := d.decide(rows, a)
	b = &pgx.Batch{}
	for _, st := range stmts {
		b.Queue(st.query, st.args...)
	}
	b.Queue("COMMIT")
	br = pc.SendBatch(ctx, b)
	for _, st := range stmts {
		tag, err := br.Exec()
		if err == nil && st.one && tag.RowsAffected() != 1 {
			err = errChanged
		}
		if err != nil {
			return verdict{}, errors.Join(err, br.Close())
		}
	}
	tag, err := br.Exec()
	if err = errors.Join(err, br.Close()); err != nil {
		return verdict{}, err
	}
	if tag.String() != "COMMIT" {
		return verdict{}, fmt.Errorf("transaction not committed (%s)", tag)
	}
	return v, nil
}

// scanRows reads the result of queries.rows from a batch.
func scanRows(br pgx.BatchResults) ([]row, error) {
	rs, err := br.Query()
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	return collectRows(rs)
}

// releaseSerialised is Release on PostgreSQL for a lease whose token is 0:
// the release statement runs in a transaction after the key's advisory
// lock (queries.lock), so that it waits for an acquire of the key still in
// progress, whose grant or queue entry it would otherwise not see (a row
// inserted by a transaction not yet committed is invisible to the DELETE,
// which does not wait for it). A Release with Lease.Abandoned is the one
// that cleans up after an acquire that failed without a verdict, typically because its context
// ended while its COMMIT was on its way: that COMMIT may still apply, and
// must apply before the cleanup, not after. Through pgx the four
// statements are pipelined in one round trip.
func (d *Driver) releaseSerialised(ctx context.Context, key string, args []any) (released bool, notified int64, err error) {
	if !d.pipeline {
		err = d.inTx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, d.q.lock, lockID(key)); err != nil {
				return err
			}
			return tx.QueryRowContext(ctx, d.q.release, args...).Scan(&released, &notified)
		})
		return released, notified, err
	}
	err = d.onPgxConn(ctx, func(pc *pgx.Conn) error {
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue(d.q.lock, lockID(key))
		b.Queue(d.q.release, args...)
		b.Queue("COMMIT")
		br := pc.SendBatch(ctx, b)
		_, err := br.Exec()
		if err == nil {
			_, err = br.Exec()
		}
		if err == nil {
			err = br.QueryRow().Scan(&released, &notified)
		}
		var tag pgconn.CommandTag
		if err == nil {
			tag, err = br.Exec()
		}
		if err = errors.Join(err, br.Close()); err != nil {
			return err
		}
		if tag.String() != "COMMIT" {
			return fmt.Errorf("transaction not committed (%s)", tag)
		}
		return nil
	})
	return released, notified, err
}
