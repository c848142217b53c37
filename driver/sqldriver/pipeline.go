package sqldriver

import (
	"context"
	sqldrv "database/sql/driver"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// acquirePipelined is acquire's transaction on PostgreSQL through pgx, in
// two round trips instead of five: BEGIN, the advisory lock and the read
// go out in one pipeline, and the statements that decide returns go out
// with the COMMIT in a second one. The statements are the same as
// acquireTx's, and run in the same order; each still has a snapshot and a
// clock of its own, taken when the server starts it, so the read sees
// every commit made before the lock was granted.
//
// A connection on which anything failed is discarded, never returned to
// the pool inside a transaction.
func (d *Driver) acquirePipelined(ctx context.Context, key, owner string, mode int, us int64, queued bool) (verdict, error) {
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return verdict{}, err
	}
	defer conn.Close()
	var v verdict
	var opErr error
	rawErr := conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			opErr = fmt.Errorf("connection %T is not pgx's", dc)
			return nil
		}
		v, opErr = d.pipelined(ctx, sc.Conn(), key, owner, mode, us, queued)
		if opErr != nil {
			return sqldrv.ErrBadConn
		}
		return nil
	})
	if opErr != nil {
		return verdict{}, opErr
	}
	return v, rawErr
}

func (d *Driver) pipelined(ctx context.Context, pc *pgx.Conn, key, owner string, mode int, us int64, queued bool) (verdict, error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(d.q.lock, lockID(key))
	b.Queue(d.q.rows, key)
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

	v, stmts := d.decide(rows, key, owner, mode, us, queued)
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
