package redisdriver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotReplicated is wrapped by the error of a grant or renewal that fewer
// than Options.Replicas replicas acknowledged within
// Options.ReplicaTimeout (see Options.Replicas). It is transient: the
// front-end retries.
var ErrNotReplicated = errors.New("not acknowledged by enough replicas")

// DefaultReplicaTimeout is the wait for replicas' acknowledgement when
// Options.ReplicaTimeout is zero.
const DefaultReplicaTimeout = time.Second

// master returns a client whose pipelines run on one connection to the
// master that serves base: WAIT counts the replicas that acknowledged the
// writes of its own connection. On Cluster it is the client of the node
// that serves base's slot, which does not follow redirections.
func (d *Driver) master(ctx context.Context, base string) (*redis.Client, error) {
	switch c := d.client.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, base)
	}
	return nil, fmt.Errorf("Options.Replicas needs a *redis.Client or *redis.ClusterClient, not %T", d.client)
}

// waitTimeout is the timeout of WAIT in milliseconds: Options.ReplicaTimeout,
// cut so that WAIT answers before ctx's deadline.
func (d *Driver) waitTimeout(ctx context.Context) int64 {
	t := d.replicaTimeout
	if dl, ok := ctx.Deadline(); ok {
		// Leave a tenth of the time left for the round trip.
		t = min(t, time.Until(dl)*9/10)
	}
	return max(t.Milliseconds(), 1)
}

// runAck is run followed by WAIT for d.replicas replicas, in the same round
// trip and on the same connection. ackErr is nil when enough replicas
// acknowledged the script's writes, and otherwise wraps ErrNotReplicated.
func (d *Driver) runAck(ctx context.Context, s *script, args []any) (res any, ackErr, err error) {
	g, direct := d.route(args[argKey].(string))
	if err := g.admit(ctx); err != nil {
		return nil, nil, err
	}
	defer g.leave()
	if direct || ctx.Done() == nil {
		res, ackErr, err = d.runAck1(ctx, s, args)
		g.suspect(ctx, err)
		d.nodes.done(err)
		return res, ackErr, err
	}
	type acked struct {
		res    any
		ackErr error
	}
	r, err := bounded(ctx, func() (acked, error) {
		res, ackErr, err := d.runAck1(ctx, s, args)
		d.nodes.done(err)
		return acked{res, ackErr}, err
	})
	return r.res, r.ackErr, err
}

func (d *Driver) runAck1(ctx context.Context, s *script, args []any) (res any, ackErr, err error) {
	node, err := d.master(ctx, args[argKey].(string))
	if err != nil {
		d.failed(err)
		return nil, nil, withCtx(ctx, err)
	}
	timeout := d.waitTimeout(ctx)
	cmd, wait := d.pipeAck(ctx, node, args, timeout)
	if isNoScript(cmd.Err()) {
		cmd, wait = d.pipeAck(ctx, node, s.evalArgs(args), timeout)
	}
	if res, err = cmd.Result(); err != nil {
		// A node client does not follow redirections: the cluster client
		// learns where the slot went.
		d.failed(err)
		return nil, nil, withCtx(ctx, err)
	}
	return res, d.ackError(ctx, wait, timeout), nil
}

// pipeAck sends the script command of args and WAIT in one pipeline on
// node.
func (d *Driver) pipeAck(ctx context.Context, node *redis.Client, args []any, timeout int64) (*redis.Cmd, *redis.IntCmd) {
	pipe := node.Pipeline()
	cmd := newCmd(ctx, args)
	wait := redis.NewIntCmd(ctx, "wait", d.replicas, timeout)
	_ = pipe.Process(ctx, cmd)
	_ = pipe.Process(ctx, wait)
	_, _ = pipe.Exec(ctx) // errors are read per command
	return cmd, wait
}

// ackError returns nil if wait, a WAIT of timeout ms, counted enough
// replicas, and otherwise an error wrapping ErrNotReplicated.
func (d *Driver) ackError(ctx context.Context, wait *redis.IntCmd, timeout int64) error {
	n, err := wait.Result()
	switch {
	case err != nil:
		return fmt.Errorf("%w: WAIT: %w", ErrNotReplicated, withCtx(ctx, err))
	case n < int64(d.replicas):
		return fmt.Errorf("%w: %d of %d replicas within %dms", ErrNotReplicated, n, d.replicas, timeout)
	}
	return nil
}
