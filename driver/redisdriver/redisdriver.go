// Package redisdriver is a locker driver for Redis, over a go-redis v9
// [redis.UniversalClient]: a standalone client, a Sentinel failover client
// or a Cluster client.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
//	d, err := redisdriver.New(rdb, nil)
//
// The driver implements [driver.Driver] and the optional [driver.Sharer],
// [driver.Notifier], [driver.Queuer], [driver.BatchRefresher] and
// [driver.TTLLimiter].
//
// # Data layout
//
// Every Redis key of one lock carries the same cluster hash tag, so that
// all of them live in one hash slot and one script can use them together on
// Redis Cluster. The tag is the lock key with '%', '{' and '}' escaped as
// %25, %7B and %7D (and the empty key written as "%"), which is injective
// and never yields an empty tag. With the default prefix "locker:", lock
// key "orders/42" uses:
//
//	locker:{orders/42}:lock      STRING "<token>:<owner>", PX = TTL: the exclusive hold
//	locker:{orders/42}:fence     STRING counter, no TTL: the last token granted
//	locker:{orders/42}:readers   ZSET owner -> expiry in ms of Redis TIME: shared holds
//	locker:{orders/42}:tokens    HASH owner -> token of each shared hold
//	locker:{orders/42}:queue     ZSET owner -> arrival order and mode: the wait queue
//	locker:{orders/42}:queue-exp ZSET owner -> expiry in ms of Redis TIME: queue entries
//	locker:{orders/42}:released  pub/sub channel, published on release
//
// Each shared holder has its own expiry and token, so a reader that dies
// expires on its own while others renew. Expired shared holds and queue
// entries are removed lazily by the scripts; the keys holding them carry a
// PEXPIRE no shorter than their longest-lived member, so nothing is left
// behind. The fence counter has no TTL: it survives release and expiry so
// that tokens keep growing. It is the only key that stays after a lock is
// released, one small string per lock key ever used.
//
// # Round trips
//
// All logic runs server-side in Lua scripts, sent with EVALSHA (and EVAL
// once per script and server, when the server answers NOSCRIPT).
// TryAcquire, TryAcquireQueued, Refresh and Release take one round trip
// each. RefreshBatch takes one round trip per 1000 leases (on Cluster, one
// per node and 1000 leases, in parallel), plus one more for the leases
// whose script the server did not have. Subscribe takes one round trip when
// the key's channel is not yet subscribed by this driver, none otherwise.
//
// # Token durability
//
// Tokens live in Redis memory. The fence counter is written like any other
// key: unless the server runs with AOF and appendfsync always (and, with
// replication, unless the replica that takes over has received the last
// write, which Redis does not guarantee), a restart or a failover can lose
// the latest increments of the fence counter, and tokens may then repeat:
// a new holder can get a token that a previous holder already had. Holds
// themselves can be lost the same way, so that two owners both believe
// they hold a key. Use fencing tokens only with such a configuration, or
// with a backend that offers stronger guarantees.
//
// Tokens are exact up to 2^53 grants per key (Lua numbers are doubles).
//
// # Clients and contexts
//
// The driver never closes the client: whoever created it owns it. Create
// the client with ContextTimeoutEnabled: true, so that the deadlines of the
// contexts passed to the driver bound its blocking network calls; without
// it go-redis applies only its own read and write timeouts.
//
// Notifier subscriptions of one Driver share one [redis.PubSub] connection
// and one goroutine, both started by the first Subscribe and ended when the
// last open subscription is closed.
//
// The scripts need Redis 5 or later (or Redis 3.2 or later with effects
// replication); any server that runs Lua scripts with TIME, sorted sets
// and hashes works, such as Valkey.
package redisdriver

import (
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/redis/go-redis/v9"
)

// DefaultPrefix is the key prefix used when Options.Prefix is empty.
const DefaultPrefix = "locker:"

// TTL limits reported by TTLRange. Redis expires keys in whole
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
}

// Driver is a locker driver over a Redis client. It is safe for concurrent
// use. Create it with New.
type Driver struct {
	client redis.UniversalClient
	prefix string

	mu  sync.Mutex
	hub *hub   // shared pub/sub connection; nil when no subscription is open
	seq uint64 // numbers the PING payloads that confirm subscriptions
}

var (
	_ driver.Driver         = (*Driver)(nil)
	_ driver.Sharer         = (*Driver)(nil)
	_ driver.Notifier       = (*Driver)(nil)
	_ driver.Queuer         = (*Driver)(nil)
	_ driver.BatchRefresher = (*Driver)(nil)
	_ driver.TTLLimiter     = (*Driver)(nil)
)

// New returns a Driver that uses client. opts may be nil. The driver does
// not close client.
func New(client redis.UniversalClient, opts *Options) (*Driver, error) {
	if client == nil {
		return nil, errors.New("redisdriver: nil client")
	}
	prefix := DefaultPrefix
	if opts != nil && opts.Prefix != "" {
		prefix = opts.Prefix
	}
	if strings.ContainsAny(prefix, "{}") {
		return nil, errors.New("redisdriver: prefix " + quote(prefix) + " contains '{' or '}'")
	}
	return &Driver{client: client, prefix: prefix}, nil
}

// SupportsShared reports true: the driver grants Mode Shared.
func (d *Driver) SupportsShared() bool { return true }

// TTLRange reports MinTTL and MaxTTL.
func (d *Driver) TTLRange() (min, max time.Duration) { return MinTTL, MaxTTL }
