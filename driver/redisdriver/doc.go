// Package redisdriver is a locker driver for Redis, over a go-redis v9
// [redis.UniversalClient]: a standalone client, a Sentinel failover client
// or a Cluster client.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
//	d, err := redisdriver.New(rdb, nil)
//	if err != nil {
//		return err
//	}
//	c := locker.New(d) // one Client per process, shared by every handle
//	defer c.Close(ctx)
//
//	h, err := c.Mutex("orders/42").Acquire(ctx)
//
// Every lock type works on it: RWMutex (each reader expiring on its own),
// ReentrantMutex, Semaphore, Election and MultiLock. Waiters are woken by
// pub/sub when a key is released and, once they have waited a moment
// (locker.WithFairnessThreshold), join a queue on the server that
// newcomers cannot overtake: a release hands the key straight to the head
// of the queue, and only that waiter's process is told. Renewals due
// together go out in pipelined batches. An uncontended lock and unlock
// take one round trip each, as does a renewal; a contended acquisition by
// another process takes two (the release that hands over, the new
// holder's queued attempt).
//
// The scripts need Redis 6.2 or later (SET with PXAT), or a compatible
// server such as Valkey. The tests run on Redis 7 (standalone, Sentinel,
// a one-node cluster and a cluster of three masters with a replica each).
// Options.Prefix (DefaultPrefix, "locker:") starts every key and channel
// the driver uses; all keys of one lock share a hash slot, so every lock
// works on Redis Cluster.
//
// # Replicas and failover
//
// Redis replicates asynchronously. What the driver guarantees:
//
//   - Standalone: holds live in the server's memory; a restart loses them
//     unless the server persists every write (AOF with appendfsync
//     always). Tokens increase either way (see Tokens).
//   - Sentinel or Cluster, without Options.Replicas: a failover keeps the
//     holds that had reached the promoted replica, which is usually all
//     of them, but it may lose the last grants and renewals; another
//     client can then acquire a key whose holder still believes it holds
//     it, until the holder's next renewal (within TTL/3). Tokens still
//     increase, so a fenced resource refuses the old holder's writes.
//   - Sentinel or Cluster, with Options.Replicas = N: a grant or renewal
//     counts only once N replicas have acknowledged it (WAIT, in the same
//     round trip), so a failover to any of them keeps every hold as its
//     holder knows it. A master that has fewer than N replicas (as right
//     after a failover) acknowledges nothing: grants fail with
//     [ErrNotReplicated], renewals too, and holders lose their holds at
//     their local deadline. Choose N below the replicas each master keeps
//     after a failure. WAIT bounds the loss, it does not make Redis
//     consistent: a replica that acknowledged can still be passed over by
//     a failover (Sentinel and Cluster prefer the most up-to-date replica,
//     but do not require it).
//
// Use maxmemory-policy noeviction on a server that holds locks: under
// another policy Redis may evict holds when it reaches maxmemory. On
// Cluster, the driver makes the ClusterClient reload its slot map after a
// failed call, so that it finds a promoted replica at once. go-redis
// fetches a ClusterClient's command table on its first routed command,
// with a timeout of its own (5s) that the call's deadline does not
// shorten; a keyed command sent when the client is created (EXISTS of any
// key) fetches it while the nodes answer.
//
// # Tokens
//
// A grant's token is the server's clock in microseconds (Redis TIME), or
// the key's last token plus one when that is larger (grants in the same
// microsecond). The last token is kept only until the server's clock has
// passed it, so the server keeps no per-key state once a released key's
// TTL has passed, and tokens strictly increase per key across the expiry
// of every key of the lock, a restart that lost the data set, and a
// failover to a replica that missed the latest writes.
//
// This rests on one assumption: server clocks do not step back, and after
// a restart or a failover the granting server's clock is not behind the
// previous one's by as much as the outage or the failover lasted. NTP
// slews small corrections without stepping; a master and replicas on
// NTP-synchronised hosts differ by far less than a failover takes. If the
// assumption is broken (a clock set back by hand or by a large NTP step),
// a later token can be lower than or equal to an earlier one, and a fenced
// resource may accept a stale holder's write. Tokens are about 1.8·10^15
// today, exact in Lua's numbers until the year 2255; they fit a uint64
// and an int64.
//
// # Semaphores and values
//
// A counted request (locker.Semaphore) is granted when no one holds the
// key exclusively and the weights of the live shared holds plus its own
// fit in its limit, in queue order, so that a large request is not
// overtaken by small ones. Every live shared hold of a key must have the
// same limit: a request whose limit differs is refused with a
// [driver.LimitError] that names theirs. A value (Request.Value, at most
// [driver.MaxValueLen] bytes) is stored with the grant and reported by
// [Driver.Inspect], with the weights and the limit. Limits above 2^53 are
// refused.
//
// # Clients and contexts
//
// The driver never closes the client: whoever created it owns it. Once the
// client is closed, every call fails at once with a permanent error
// wrapping redis.ErrClosed.
//
// A *redis.Client made with default options needs nothing more: the
// driver sends its commands, on the caller's goroutine, through a clone of
// it (Client.WithTimeout: the same pool and timeouts) that ends each call
// at its context's deadline, reached through a hook the driver adds to the
// client once, so that hooks added to the client before New still see the
// driver's commands (hooks added later do not). A ClusterClient or Ring
// made with default options is handled through its node clients: the
// driver binds each node's *redis.Client as above, the nodes created
// later as they are created (OnNewNode) and the others when a call is
// first routed to them, so that calls go through the cluster's or ring's
// hooks and then the node's, on the caller's goroutine. On a
// ClusterClient, a Driver's calls wait on a goroutine of their own until
// one of them has loaded the slot map (the first call, usually), and a
// call that a change of the slot map sends to another node than the one
// it was checked against (during a failover) is bounded by that node's
// own timeouts if the node existed before New and no call was routed to
// it since then. A call that its deadline ended fails with an error
// wrapping the context's error; one whose context is already done fails
// at once.
//
// A call cut short by its deadline costs go-redis its connection. So the
// calls through one *redis.Client (the client itself, or a node's or
// shard's of a ClusterClient or Ring), from all the drivers that use it,
// are at most its PoolSize at a time, and after three in a row timed out
// they wait for the answer to one PING: a server that stopped answering
// costs a dial per PING, not per call.
//
// The subscriptions of one Driver's waiters share one [redis.PubSub]
// connection and one goroutine, ended 200 ms after the last subscription
// closes, so that successive waits do not dial anew.
//
// The keys of a lock, the scripts and their fast paths, and the round
// trips of each call are described in docs/redisdriver.md at the
// repository's root.
package redisdriver
