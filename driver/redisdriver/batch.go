package redisdriver

import (
	"context"
	"errors"

	"github.com/go-locker/locker/driver"
	"github.com/redis/go-redis/v9"
)

// batchChunk is the number of refreshes sent in one pipeline.
const batchChunk = 1000

// RefreshBatch implements driver.BatchRefresher: it sends the leases'
// refresh scripts in pipelines of 1000, one round trip each (on Cluster,
// one per node, in parallel). Leases whose script the server does not
// have (NOSCRIPT: not run) are sent once more with EVAL, which also caches
// the script.
func (d *Driver) RefreshBatch(ctx context.Context, ls []driver.Lease) []error {
	errs := make([]error, len(ls))
	if err := ctx.Err(); err != nil {
		for i, l := range ls {
			errs[i] = opError("refresh", l.Key, err)
		}
		return errs
	}
	for start := 0; start < len(ls); start += batchChunk {
		end := min(start+batchChunk, len(ls))
		chunk, cerrs := ls[start:end], errs[start:end]
		if d.ctxBound || ctx.Done() == nil {
			d.refreshChunk(ctx, chunk, cerrs)
			continue
		}
		// The client ignores ctx's deadline: wait for the chunk in a
		// goroutine that writes errors of its own.
		got, err := bounded(ctx, func() ([]error, error) {
			e := make([]error, len(chunk))
			d.refreshChunk(ctx, chunk, e)
			return e, nil
		})
		for i, l := range chunk {
			if err != nil {
				cerrs[i] = opError("refresh", l.Key, err)
			} else {
				cerrs[i] = got[i]
			}
		}
	}
	return errs
}

type batchItem struct {
	i    int
	args []any
	ms   int64
	cmd  *redis.Cmd
}

func (d *Driver) refreshChunk(ctx context.Context, ls []driver.Lease, errs []error) {
	items := make([]batchItem, 0, len(ls))
	for i, l := range ls {
		args, ms, err := d.refreshArgs(l)
		if err != nil {
			errs[i] = opError("refresh", l.Key, err)
			continue
		}
		items = append(items, batchItem{i: i, args: args, ms: ms})
	}
	if len(items) == 0 {
		return
	}
	pipe := d.client.Pipeline()
	for j := range items {
		it := &items[j]
		it.cmd = newCmd(ctx, it.args)
		_ = pipe.Process(ctx, it.cmd)
	}
	_, _ = pipe.Exec(ctx) // errors are read per command

	var retry []*batchItem
	for j := range items {
		it := &items[j]
		if isNoScript(it.cmd.Err()) {
			retry = append(retry, it)
			continue
		}
		res, err := it.cmd.Result()
		_, errs[it.i] = refreshResult(ls[it.i], it.ms, res, withCtx(ctx, err))
	}
	if len(retry) == 0 {
		return
	}
	pipe = d.client.Pipeline()
	for _, it := range retry {
		it.cmd = newCmd(ctx, refreshScript.evalArgs(it.args))
		_ = pipe.Process(ctx, it.cmd)
	}
	_, _ = pipe.Exec(ctx)
	for _, it := range retry {
		res, err := it.cmd.Result()
		_, errs[it.i] = refreshResult(ls[it.i], it.ms, res, withCtx(ctx, err))
	}
}

func isNoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}
