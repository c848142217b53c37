package redisdriver

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/redis/go-redis/v9"
)

// A *redis.Client made without ContextTimeoutEnabled ignores the deadlines
// of its calls' contexts. The driver does not wait for such calls on a
// goroutine of its own (twice the client CPU of a bounded call): it sends
// its commands through a clone of the client (Client.WithTimeout) that
// shares the client's connection pool, with the client's timeouts, and
// with ContextTimeoutEnabled set on the clone's own copy of the options.
// go-redis clones do not carry the hooks of their parent (in v9.23 the
// hooks live in the part of a client that a clone does not copy), so the
// driver adds one
// hook of its own to the client, once per client: it passes every command
// and pipeline of the driver's scripts, after the hooks added before it,
// to the clone, and every other command to the next hook. The client's
// hooks added before the driver's still see the driver's commands; hooks
// added later do not. Where clones do carry their parent's hooks, the
// driver calls the clone itself.

// bind returns the binding of c, a *redis.Client made without
// ContextTimeoutEnabled: the clients the driver calls.
func bind(c *redis.Client) *binding {
	b, _ := perClient(&bound, c, func() *binding { return new(binding) })
	b.once.Do(func() { b.init(c) })
	return b
}

// bound maps each *redis.Client (weakly: a binding does not keep its
// client alive) to its binding.
var bound sync.Map // weak.Pointer[redis.Client] -> *binding

// perClient returns the value that m holds for c, storing fresh() the
// first time; loaded is false for the call that stored it. m's keys are
// weak pointers, so that an entry does not keep its client alive, and an
// entry is deleted once its client is collected. A value must not refer
// to its client but weakly.
func perClient[T, V any](m *sync.Map, c *T, fresh func() V) (v V, loaded bool) {
	k := weak.Make(c)
	if e, ok := m.Load(k); ok {
		return e.(V), true
	}
	e, loaded := m.LoadOrStore(k, fresh())
	if !loaded {
		runtime.AddCleanup(c, func(k weak.Pointer[T]) { m.Delete(k) }, k)
	}
	return e.(V), loaded
}

type binding struct {
	once sync.Once
	// clone is the client's clone bounded by its calls' contexts, nil
	// when none could be made. It opens the driver's pub/sub connections
	// (whose handshake a command hook does not see). The driver sends its
	// commands to the client, whose hook diverts them to the clone, or,
	// when callClone is true, to the clone itself. A binding holds no
	// reference to its client: bound would keep the client alive.
	clone     *redis.Client
	callClone bool
}

func (b *binding) init(c *redis.Client) {
	o := c.Options()
	clone := c.WithTimeout(o.ReadTimeout)
	co := clone.Options()
	if co == o { // a go-redis whose clones share their parent's options
		return
	}
	co.WriteTimeout = o.WriteTimeout
	co.ContextTimeoutEnabled = true
	b.clone = clone
	if b.callClone = clonesKeepHooks(); !b.callClone {
		c.AddHook(divert{clone})
	}
}

// divert is the hook that passes the driver's commands to the bounded
// clone.
type divert struct{ to *redis.Client }

func (divert) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h divert) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if ours(cmd) {
			return h.to.Process(ctx, cmd)
		}
		return next(ctx, cmd)
	}
}

func (h divert) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) == 0 || !ours(cmds[0]) {
			return next(ctx, cmds)
		}
		p := h.to.Pipeline()
		for _, cmd := range cmds {
			_ = p.Process(ctx, cmd)
		}
		_, err := p.Exec(ctx)
		return err
	}
}

// ours reports whether cmd runs one of the driver's scripts.
func ours(cmd redis.Cmder) bool {
	a := cmd.Args()
	if len(a) <= argBody || (a[argName] != "evalsha" && a[argName] != "eval") {
		return false
	}
	body, ok := a[argBody].(string)
	return ok && scriptBodies[body]
}

// scriptBodies holds the SHA-1 and the source of every script (see
// newScript).
var scriptBodies = map[string]bool{}

// clonesKeepHooks reports whether a clone made by Client.WithTimeout runs
// the hooks of its parent: it asks a client that never connects (its
// Limiter refuses every command that passes its hooks).
var clonesKeepHooks = sync.OnceValue(func() bool {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", Limiter: refuse{}, MaxRetries: -1})
	defer c.Close()
	var h seen
	c.AddHook(&h)
	ctx := context.Background()
	_ = c.WithTimeout(0).Process(ctx, redis.NewCmd(ctx, "ping"))
	return h.seen
})

// seen is a hook that notes that a command came and answers it itself.
type seen struct{ seen bool }

func (*seen) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *seen) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(context.Context, redis.Cmder) error { h.seen = true; return nil }
}

func (*seen) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// refuse is a redis.Limiter that allows nothing.
type refuse struct{}

func (refuse) Allow() error       { return errors.New("redisdriver: not sent") }
func (refuse) ReportResult(error) {}

// A *redis.ClusterClient or *redis.Ring made without ContextTimeoutEnabled
// sends each command through the *redis.Client of the node (or shard)
// that serves its key. The driver binds those node clients as it binds a
// *redis.Client: the ones the cluster or ring creates from then on as they
// are created (OnNewNode, registered once per client), and the others when
// a call is first routed to them. A call is sent on the caller's goroutine
// when the node that serves its key is known without a round trip and is
// bound: always on a Ring; on a ClusterClient once a call of the driver has
// loaded the slot map and command table, which the first call does on a
// goroutine of its own (see Driver.route). A call that the cluster
// redirects (MOVED, after a failover or a resharding) goes to the node
// redirected to, which the cluster creates, and so binds, if it is new.

// nodeBinding finds the node clients of a ClusterClient or Ring, which the
// driver binds when the client was made without ContextTimeoutEnabled; a
// nil *nodeBinding finds none.
type nodeBinding struct {
	cluster *redis.ClusterClient // or
	ring    *redis.Ring
	// loaded is set once a call of the driver's has come back from the
	// cluster: its slot map and command table are loaded, so that
	// MasterForKey answers without a round trip.
	loaded atomic.Bool
}

// bindNodes returns the nodeBinding of client, whose calls are bounded by
// their contexts when ctxBound is true, or nil when client is not a
// ClusterClient or Ring, or when its node clients cannot be bound (a
// go-redis whose clones share their parent's options or keep its hooks,
// so that no hook of the node client's can divert the driver's commands).
// Without ctxBound it has the cluster or ring bind each node client it
// creates.
func bindNodes(client redis.UniversalClient, ctxBound bool) *nodeBinding {
	if !ctxBound && !cloneDiverts() {
		return nil
	}
	var b nodeBinding
	switch c := client.(type) {
	case *redis.ClusterClient:
		b.cluster = c
		if !ctxBound {
			bindNew(c)
		}
	case *redis.Ring:
		b.ring = c
		if !ctxBound {
			bindNew(c)
		}
	default:
		return nil
	}
	return &b
}

// bindNew has c bind each node client it creates, once per c however
// many drivers use it.
func bindNew[T any, P interface {
	*T
	OnNewNode(func(*redis.Client))
}](c P) {
	if _, loaded := perClient(&nodesBound, (*T)(c), func() bool { return true }); !loaded {
		c.OnNewNode(func(n *redis.Client) { bind(n) })
	}
}

// nodesBound holds the ClusterClients and Rings (weakly) whose new nodes
// are bound.
var nodesBound sync.Map

// node returns the client of the node (or shard) that serves key, when it
// is known without a round trip: always on a Ring; on a ClusterClient once
// its slot map is loaded (a stale map is reloaded in the background).
func (b *nodeBinding) node(key string) *redis.Client {
	if b == nil {
		return nil
	}
	var node *redis.Client
	var err error
	switch {
	case b.ring != nil:
		node, err = b.ring.GetShardClientForKey(key)
	case b.loaded.Load():
		node, err = b.cluster.MasterForKey(context.Background(), key)
	}
	if err != nil {
		return nil
	}
	return node
}

// all reports whether a batch's pipelines may be sent on the caller's
// goroutine: on a ClusterClient once its slot map is loaded (refreshNode
// binds each node it sends to), on a Ring once its live shards, which its
// pipelines reach, are bound.
func (b *nodeBinding) all() bool {
	switch {
	case b == nil:
		return false
	case b.ring != nil:
		for _, s := range b.ring.GetShardClients() {
			if guardOf(s) == nil { // binds s
				return false
			}
		}
		return true
	}
	return b.loaded.Load()
}

// done notes that a call routed through the cluster came back with err.
func (b *nodeBinding) done(err error) {
	if b != nil && err == nil && !b.loaded.Load() {
		b.loaded.Store(true)
	}
}

// cloneDiverts reports whether bind makes a clone bounded by its calls'
// contexts and diverts the driver's commands to it with a hook of the
// client's own.
var cloneDiverts = sync.OnceValue(func() bool {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	return c.WithTimeout(time.Second).Options() != c.Options() && !clonesKeepHooks()
})
