package redisdriver

import (
	"context"
	"errors"
	"sync"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
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
	for start, end := range driverkit.Chunks(len(ls), batchChunk, nil) {
		chunk, cerrs := ls[start:end], errs[start:end]
		if err := d.guard.admit(ctx); err != nil {
			for i, l := range chunk {
				cerrs[i] = opError("refresh", l.Key, err)
			}
			continue
		}
		if d.ctxBound || ctx.Done() == nil || d.nodes.all() {
			d.refreshChunk(ctx, chunk, cerrs)
		} else {
			d.refreshBounded(ctx, chunk, cerrs)
		}
		d.guard.leave()
	}
	return errs
}

// refreshBounded is refreshChunk for a client that ignores ctx's
// deadline: it waits for the chunk in a goroutine that writes errors of
// its own.
func (d *Driver) refreshBounded(ctx context.Context, chunk []driver.Lease, errs []error) {
	got, err := bounded(ctx, func() ([]error, error) {
		e := make([]error, len(chunk))
		d.refreshChunk(ctx, chunk, e)
		d.nodes.done(errors.Join(e...))
		return e, nil
	})
	for i, l := range chunk {
		if err != nil {
			errs[i] = opError("refresh", l.Key, err)
		} else {
			errs[i] = got[i]
		}
	}
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
		args, ms := d.refreshArgs(l)
		items = append(items, batchItem{i: i, args: args, ms: ms})
	}
	if len(items) == 0 {
		return
	}
	_, cluster := d.client.(*redis.ClusterClient)
	if d.replicas == 0 && !cluster {
		its := make([]*batchItem, len(items))
		for j := range items {
			its[j] = &items[j]
		}
		d.refreshItems(ctx, d.client, d.guard, its, ls, errs, false)
		return
	}
	// One pipeline per master, in parallel: WAIT counts the writes of
	// one connection, and a ClusterClient's own pipeline, when it retries
	// the commands of a master that fails, gives every command of the
	// pipeline the error with which its retries end, so that the leases
	// of one dead master would fail on every master.
	groups := make(map[*redis.Client][]*batchItem)
	for j := range items {
		it := &items[j]
		node, err := d.master(ctx, it.args[argKey].(string))
		if err != nil {
			d.failed(err)
			errs[it.i] = opError("refresh", ls[it.i].Key, withCtx(ctx, err))
			continue
		}
		groups[node] = append(groups[node], it)
	}
	// The last group on the caller's goroutine.
	var wg sync.WaitGroup
	n := 0
	for node, its := range groups {
		if n++; n < len(groups) {
			wg.Go(func() { d.refreshNode(ctx, node, its, ls, errs) })
		} else {
			d.refreshNode(ctx, node, its, ls, errs)
		}
	}
	wg.Wait()
}

// refreshNode is refreshItems for the items of one node client. On a
// ClusterClient the node's stall guard admits the pipeline; a *redis.Client's
// was taken by RefreshBatch.
func (d *Driver) refreshNode(ctx context.Context, node *redis.Client, items []*batchItem, ls []driver.Lease, errs []error) {
	g := d.guard
	if g == nil {
		g = guardOf(node)
		if err := g.admit(ctx); err != nil {
			for _, it := range items {
				errs[it.i] = opError("refresh", ls[it.i].Key, err)
			}
			return
		}
		defer g.leave()
	}
	d.refreshItems(ctx, node, g, items, ls, errs, d.replicas > 0)
}

// refreshItems sends the refreshes of items in one pipeline of c, followed
// by WAIT when wait is true, and again, with EVAL, those whose script the
// server did not have; g, c's stall guard, counts the outcome. It sets the
// errors of ls's leases in errs.
func (d *Driver) refreshItems(ctx context.Context, c redis.UniversalClient, g *guard, items []*batchItem, ls []driver.Lease, errs []error, wait bool) {
	var timeout int64
	if wait {
		timeout = d.waitTimeout(ctx)
	}
	send := func(items []*batchItem, eval bool) *redis.IntCmd {
		pipe := c.Pipeline()
		for _, it := range items {
			args := it.args
			if eval {
				args = refreshScript.evalArgs(args)
			}
			it.cmd = newCmd(ctx, args)
			_ = pipe.Process(ctx, it.cmd)
		}
		var w *redis.IntCmd
		if wait {
			w = redis.NewIntCmd(ctx, "wait", d.replicas, timeout)
			_ = pipe.Process(ctx, w)
		}
		_, _ = pipe.Exec(ctx) // errors are read per command
		return w
	}
	w := send(items, false)
	var retry []*batchItem
	for _, it := range items {
		if isNoScript(it.cmd.Err()) {
			retry = append(retry, it)
		}
	}
	var w2 *redis.IntCmd
	if len(retry) > 0 {
		w2 = send(retry, true)
	}
	var ackErr error
	if wait {
		// The pipelines may have had connections of their own: each
		// WAIT covers its own.
		ackErr = d.ackError(ctx, w, timeout)
		if ackErr == nil && w2 != nil {
			ackErr = d.ackError(ctx, w2, timeout)
		}
	}
	g.suspect(ctx, items[0].cmd.Err())
	for _, it := range items {
		res, err := it.cmd.Result()
		d.failed(err)
		var l driver.Lease
		l, errs[it.i] = refreshResult(ls[it.i], it.ms, res, withCtx(ctx, err))
		if errs[it.i] == nil && ackErr != nil {
			errs[it.i] = opError("refresh", l.Key, ackErr)
		}
	}
}

func isNoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}
