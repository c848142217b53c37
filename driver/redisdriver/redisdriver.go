package redisdriver

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
	"github.com/go-locker/locker/internal/limbo"
	"github.com/redis/go-redis/v9"
)

// DefaultPrefix is the key prefix used when Options.Prefix is empty.
const DefaultPrefix = "locker:"

// TTL limits reported by Capabilities. Redis expires keys in whole
// milliseconds; a TTL is truncated to a multiple of a millisecond, and the
// lease reports the truncated TTL.
const (
	MinTTL = time.Millisecond
	MaxTTL = 365 * 24 * time.Hour
)

// Options configures a Driver. The zero value, like a nil *Options, selects
// the defaults.
type Options struct {
	// Prefix starts every Redis key and channel name the driver uses. It
	// must not contain '{' or '}', which would change the keys' hash tag.
	// Empty means DefaultPrefix.
	Prefix string

	// Replicas, when positive, makes every grant and renewal wait until
	// that many replicas of the master have acknowledged it (Redis WAIT,
	// sent in the same round trip, on the same connection), so that a
	// failover to one of them keeps the hold. A grant that fewer replicas
	// acknowledged within ReplicaTimeout is released and the attempt fails
	// with a transient error wrapping ErrNotReplicated, which the front-end
	// retries. That release names the grant's token; if it goes
	// unanswered, it may still reach the server after the retry, so a
	// grant of the same owner with that token is released again and
	// refused with a transient error until the server is known to have
	// dropped it. A renewal fails likewise (the hold stays, and its holder
	// counts from its last acknowledged renewal). A handoff to a queued
	// owner then takes the owner's next round trip too, to be acknowledged.
	// It needs a *redis.Client (standalone or Sentinel failover) or a
	// *redis.ClusterClient. Zero: no wait.
	Replicas int
	// ReplicaTimeout bounds the wait for Replicas, further cut to nine
	// tenths of the time the call's context has left. Zero means
	// DefaultReplicaTimeout.
	ReplicaTimeout time.Duration
}

// Driver is a locker driver over a Redis client. It is safe for concurrent
// use. Create it with New.
type Driver struct {
	client redis.UniversalClient
	// direct is client, or its clone bounded by the calls' contexts (see
	// bind): it opens the driver's pub/sub connections.
	direct redis.UniversalClient
	// guard is the stall guard of a *redis.Client (see admit); nil for
	// a ClusterClient or Ring, whose nodes have guards of their own
	// (see route), or a client whose calls wait on goroutines.
	guard  *guard
	prefix string
	// ctxBound is true when the client bounds its calls by their
	// context's deadline (ContextTimeoutEnabled, or a *redis.Client, see
	// bind). Otherwise (a ClusterClient or Ring made without it) nodes
	// binds its node clients, and a call whose node is not bound yet
	// waits in a goroutine of its own (see bounded).
	ctxBound bool
	nodes    *nodeBinding
	// replicas and replicaTimeout are Options.Replicas and
	// Options.ReplicaTimeout (defaulted).
	replicas       int
	replicaTimeout time.Duration
	// limbo holds the grants given back for want of acknowledgements
	// whose release went unanswered (see giveBack).
	limbo limbo.Set

	mu  sync.Mutex
	hub *hub // shared pub/sub connection; nil when no subscription is open
	// fan holds the open subscriptions, by key; its OnClose is subClosed.
	fan driverkit.Fanout
	seq uint64 // numbers the PING payloads that confirm subscriptions
	// queued holds the owners this driver has put in a wait queue and
	// not yet seen granted or released: a release that hands a key over
	// to one of them wakes this driver's subscriptions, one that hands it
	// to another driver's owner does not.
	queued map[string]*queuedOwner
	// note is the driver's own pub/sub channel, "<prefix>notify:<id>"
	// with id random: the scripts publish there the handoffs to the
	// owners it queued (see handoff in common.lua), which no other
	// process needs to read.
	note string
}

// queuedOwner is what a driver knows of an owner it queued.
type queuedOwner struct {
	// confirmed is when the last queued request that Redis answered was
	// sent: the owner's queue entry lives at least TTL from then. pending
	// is when the first request since then was sent, if any.
	confirmed, pending time.Time
	// granted is the token of a handoff announced for the owner, 0 if
	// none. floor is the bound of the key's tokens that the last refusal
	// of the owner's queued request reported (0: none yet): a handoff
	// to this entry has a greater token, an announcement with a lower
	// one is stale, from an earlier entry of the same owner whose
	// message came late.
	granted, floor uint64
	// key is the key the owner waits for.
	key string
}

// start is a time no later than the start of the owner's queue entry's
// current lifetime, which a handoff's lease shares.
func (q *queuedOwner) start() time.Time {
	if !q.confirmed.IsZero() {
		return q.confirmed
	}
	return q.pending
}

var (
	_ driver.Driver         = (*Driver)(nil)
	_ driver.Describer      = (*Driver)(nil)
	_ driver.Notifier       = (*Driver)(nil)
	_ driver.BatchRefresher = (*Driver)(nil)
)

// New returns a Driver that uses client. opts may be nil. The driver does
// not close client.
func New(client redis.UniversalClient, opts *Options) (*Driver, error) {
	if client == nil {
		return nil, errors.New("redisdriver: nil client")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	prefix := DefaultPrefix
	if o.Prefix != "" {
		prefix = o.Prefix
	}
	if strings.ContainsAny(prefix, "{}") {
		return nil, errors.New("redisdriver: prefix " + quote(prefix) + " contains '{' or '}'")
	}
	if o.Replicas < 0 || o.ReplicaTimeout < 0 {
		return nil, fmt.Errorf("redisdriver: negative Replicas (%d) or ReplicaTimeout (%v)", o.Replicas, o.ReplicaTimeout)
	}
	if o.ReplicaTimeout == 0 {
		o.ReplicaTimeout = DefaultReplicaTimeout
	}
	direct, ctxBound := client, contextBound(client)
	var g *guard
	if c, ok := client.(*redis.Client); ok {
		g = guardOf(c)
		if !ctxBound {
			if b := bind(c); b.clone != nil {
				direct, ctxBound = b.clone, true
				if b.callClone {
					client = b.clone
				}
			}
		}
	}
	d := &Driver{client: client, direct: direct, guard: g, prefix: prefix, ctxBound: ctxBound, nodes: bindNodes(client, ctxBound),
		replicas: o.Replicas, replicaTimeout: o.ReplicaTimeout,
		queued: make(map[string]*queuedOwner)}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("redisdriver: %w", err)
	}
	d.note = prefix + "notify:" + hex.EncodeToString(id[:])
	d.fan.OnClose = d.subClosed
	if d.replicas > 0 {
		switch client.(type) {
		case *redis.Client, *redis.ClusterClient:
		default:
			return nil, fmt.Errorf("redisdriver: Options.Replicas needs a *redis.Client or *redis.ClusterClient, not %T", client)
		}
	}
	return d, nil
}

// contextBound reports whether client was created with
// ContextTimeoutEnabled, so that the deadlines of the contexts of its calls
// bound their network reads and writes.
func contextBound(client redis.UniversalClient) bool {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// Capabilities implements driver.Describer: the driver grants shared and
// counted requests (Request.Limit > 0, up to 2^53), keeps values and
// reports them through Inspect, keeps a wait queue (Request.Queued),
// raises token floors (Request.MinToken), notifies and refreshes in
// batches, with TTLs from MinTTL to MaxTTL.
func (d *Driver) Capabilities() driver.Capabilities {
	return driver.Capabilities{
		Shared: true, Counted: true, Values: true,
		MinTTL: MinTTL, MaxTTL: MaxTTL,
		Queue: true, TokenFloor: true,
		Notify: true, RefreshBatch: true, Inspect: true,
	}
}
