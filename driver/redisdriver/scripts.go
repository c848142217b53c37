package redisdriver

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/go-locker/locker/driver/driverkit"
	"github.com/redis/go-redis/v9"
)

var (
	//go:embed common.lua
	commonLua string
	//go:embed acquire.lua
	acquireLua string
	//go:embed refresh.lua
	refreshLua string
	//go:embed release.lua
	releaseLua string
	//go:embed acquire_fast.lua
	acquireFastLua string
	//go:embed release_fast.lua
	releaseFastLua string
)

// The scripts: each is its fast path, if any, then common.lua, then its
// body. A fast path runs before the prelude's definitions, which cost
// several microseconds of server time per call.
var (
	acquireScript = newScript(acquireFastLua, acquireLua)
	refreshScript = newScript("", refreshLua)
	releaseScript = newScript(releaseFastLua, releaseLua)
)

// script is one Lua script. Its source and SHA-1 are boxed once, so that
// building a command does not allocate them.
type script struct {
	src any // string: the source, for EVAL
	sha any // string: the hex SHA-1 of the source, for EVALSHA
}

func newScript(fast, body string) *script {
	src := fast + "\n" + commonLua + "\n" + body
	sum := sha1.Sum([]byte(src))
	sha := hex.EncodeToString(sum[:])
	scriptBodies[src], scriptBodies[sha] = true, true
	return &script{src: src, sha: sha}
}

// Positions in the arguments of a script command, which are those of
// EVALSHA: "evalsha", sha, numkeys (1), KEYS[1], ARGV... The command names
// are lower case, which go-redis's Cmd.Name returns without allocating.
const (
	argName    = 0
	argBody    = 1
	argNumKeys = 2
	argKey     = 3
)

// args returns the arguments of the EVALSHA command that runs s on the
// lock whose base key is base (see Driver.base), with argv as ARGV. The
// base is the script's only key: the scripts derive the lock's keys from
// it (see common.lua).
func (s *script) args(base string, argv ...any) []any {
	args := make([]any, argKey+1+len(argv))
	args[argName], args[argBody], args[argNumKeys], args[argKey] = "evalsha", s.sha, 1, base
	copy(args[argKey+1:], argv)
	return args
}

// ownerArgs holds the arguments of a call of a script with the lock's
// base, an owner, a mode and one number (the last argument, which the
// caller sets to &ms or &tok), and the values they point to: the hot
// acquire and release build their arguments in one allocation instead of
// boxing each (go-redis writes *string, *int64 and *uint64 as their
// values).
type ownerArgs struct {
	args  [argKey + 4]any
	owner string
	ms    int64
	tok   uint64
}

// ownerArgs returns the arguments of s with base, owner and mode, the
// last one left for the caller to set.
func (s *script) ownerArgs(base, owner string, mode any) *ownerArgs {
	a := &ownerArgs{owner: owner}
	// Field by field: a composite literal is built aside and copied.
	a.args[argName], a.args[argBody], a.args[argNumKeys], a.args[argKey] = "evalsha", s.sha, 1, base
	a.args[argKey+1], a.args[argKey+2] = &a.owner, mode
	return a
}

// evalArgs returns args, the arguments of an EVALSHA of s, turned into
// those of an EVAL of s, in a new slice.
func (s *script) evalArgs(args []any) []any {
	e := append([]any(nil), args...)
	e[argName], e[argBody] = "eval", s.src
	return e
}

// newCmd returns the command of args, routed on Cluster by KEYS[1].
func newCmd(ctx context.Context, args []any) *redis.Cmd {
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(argKey)
	return cmd
}

// run sends the EVALSHA of args, built by s.args, and sends it
// again as EVAL, which caches the script, when the server does not have
// the script (NOSCRIPT). It returns by ctx's deadline (see bounded), with
// an error that wraps ctx's error when ctx ended the call.
func (d *Driver) run(ctx context.Context, s *script, args []any) (any, error) {
	g, direct := d.route(args[argKey].(string))
	if err := g.admit(ctx); err != nil {
		return nil, err
	}
	defer g.leave()
	if direct || ctx.Done() == nil {
		res, err := d.run1(ctx, s, args)
		g.suspect(ctx, err)
		d.nodes.done(err)
		return res, err
	}
	return bounded(ctx, func() (any, error) {
		res, err := d.run1(ctx, s, args)
		d.nodes.done(err)
		return res, err
	})
}

// route returns the stall guard of the client that serves key (nil if
// none: see guardOf) and whether a call for key may be sent on the
// caller's goroutine: the client bounds it by its context's deadline, or
// the node client that serves key is bound (see bind).
func (d *Driver) route(key string) (*guard, bool) {
	if d.guard != nil || d.nodes == nil {
		return d.guard, d.ctxBound
	}
	node := d.nodes.node(key)
	if node == nil {
		return nil, d.ctxBound
	}
	g := guardOf(node) // binds node when it was made without ContextTimeoutEnabled
	return g, d.ctxBound || g != nil
}

func (d *Driver) run1(ctx context.Context, s *script, args []any) (any, error) {
	cmd := newCmd(ctx, args)
	_ = d.client.Process(ctx, cmd)
	if isNoScript(cmd.Err()) {
		cmd = newCmd(ctx, s.evalArgs(args))
		_ = d.client.Process(ctx, cmd)
	}
	res, err := cmd.Result()
	d.failed(err)
	return res, withCtx(ctx, err)
}

// failed asks a ClusterClient to reload its slot map after a call failed
// with err (nil: the call succeeded, nothing to do). go-redis reloads it on
// redirections only, or once a minute: after a failover it would go on
// sending a dead master's slots to it. A reload is asynchronous, and
// go-redis runs at most one every 200ms.
func (d *Driver) failed(err error) {
	if err == nil || errors.Is(err, redis.ErrClosed) || errors.Is(err, context.Canceled) {
		return
	}
	if c, ok := d.client.(*redis.ClusterClient); ok {
		c.ReloadState(context.Background())
	}
}

// bounded runs f for a client that does not bound its calls by their
// context (created without ContextTimeoutEnabled, see New): it returns
// f's result, or ctx's error as soon as ctx is done, leaving f to finish
// in the background when the client's own timeouts end it.
func bounded[T any](ctx context.Context, f func() (T, error)) (T, error) {
	v, err := driverkit.Call(ctx, f, nil)
	if cerr := ctx.Err(); err != nil && cerr != nil && err == cerr {
		return v, fmt.Errorf("%w (the client was created without ContextTimeoutEnabled: the request is abandoned, not cancelled)", err)
	}
	return v, err
}

// withCtx returns err, wrapping ctx's error too when ctx is done or its
// deadline has passed: a call that the deadline cut short fails with the
// network's timeout, which says nothing of the context (and may come a
// moment before the context's own timer marks it done).
func withCtx(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	cerr := ctx.Err()
	if dl, ok := ctx.Deadline(); ok && cerr == nil && !time.Now().Before(dl) {
		cerr = context.DeadlineExceeded
	}
	if cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %w", cerr, err)
	}
	return err
}
