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
// together go out in pipelined batches. Tokens are the server's clock in
// microseconds, so they keep increasing across restarts and failovers
// (see Tokens); holds survive them only as far as Redis keeps its data
// (see Replicas and failover).
//
// The scripts need Redis 6.2 or later (SET with PXAT), or a compatible
// server such as Valkey. Use maxmemory-policy noeviction on a server that
// holds locks. The tests run on Redis 7 (standalone, Sentinel, a one-node
// cluster and a cluster of three masters with a replica each) and on
// miniredis.
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
//     of them (replication lags by well under a millisecond on a local
//     network), but it may lose the last grants and renewals; another
//     client can then acquire a key whose holder still believes it holds
//     it, until the holder's next renewal. Tokens still increase.
//   - Sentinel or Cluster, with Options.Replicas = N: a grant or renewal
//     counts only once N replicas have acknowledged it (WAIT), so a
//     failover to any of them keeps every hold as its holder knows it:
//     nobody else gets the key while the holder believes it holds it. A
//     master that has fewer than N replicas (as right after a failover,
//     until the old master returns as a replica) acknowledges nothing:
//     grants fail with ErrNotReplicated, renewals too, and holders lose
//     their holds at their local deadline while the holds still stand on
//     the server. Choose N below the replicas each master keeps after a
//     failure. WAIT bounds the loss, it does not make Redis consistent: a
//     replica that acknowledged can still be passed over by a failover
//     (Sentinel and Cluster prefer the most up-to-date replica, but do not
//     require it).
//
// On Cluster, a failed call makes the ClusterClient reload its slot map
// (go-redis otherwise reloads it on redirections or once a minute, and
// would go on sending a dead master's slots to it), and RefreshBatch sends
// one pipeline per master, so that a dead master fails only its own leases.
//
// go-redis fetches the command table (COMMAND) from a random node on a
// ClusterClient's first routed command, with a timeout of its own (5s)
// that the call's deadline does not shorten: if that node hangs, the
// client's first call overshoots its deadline. A keyed command sent when
// the client is created (EXISTS of any key) fetches the table while the
// nodes answer; the failover tests do so.
//
// # Tokens
//
// A grant's token is the server's clock in microseconds (Redis TIME), or
// the last token of the key plus one when that is larger (grants in the
// same microsecond, one handoff to several readers). The last token is
// kept in the fence key only while the server's clock has not passed it:
// the key expires (PXAT) at the millisecond after the token's, and from
// then on the clock alone exceeds every token granted. An uncontended
// grant writes no fence key at all, since its token is the clock's; its
// release keeps the token only if it comes in the grant's own
// microsecond. So tokens strictly increase per key across:
//
//   - the expiry of the fence key, and of every other key of the lock;
//   - a restart that lost the data set (no persistence, kill -9);
//   - a failover to a replica that missed the latest writes (Sentinel or
//     Cluster);
//
// and the server keeps no per-key state once a released key's TTL has
// passed. Refused attempts write no token.
//
// This rests on one assumption: the clock of the server that grants reads
// later than it, or the clock of the server before a restart or failover,
// did at the last grant of the key. That is, server clocks do not step
// back, and after a restart or a failover the granting server's clock is
// not behind the previous one's by as much as the outage or the failover
// lasted (a failover takes seconds; a restart at least milliseconds). NTP
// slews small corrections without stepping; a master and replicas on
// NTP-synchronised hosts differ by far less than a failover takes. If the
// assumption is broken (a clock set back by hand or by a large NTP step, a
// replica whose clock runs behind its master's by more than the failover
// took), a later token can be lower than or equal to an earlier one, and a
// fenced resource may accept a stale holder's write. A clock stepped back
// while the last token is still kept is bridged: grants count up from it.
// Tokens are microseconds since 1970: about 1.8·10^15 today, below 2^53
// (exact in Lua's numbers) until the year 2255, so they fit a uint64 and
// an int64. A server clock set years ahead would reach that bound sooner.
//
// The holds themselves are not durable: a restart without persistence, or
// a failover to a replica that missed a grant or renewal, loses them, and
// another client can get the key before the old holder's next renewal
// tells it so (within TTL/3). The new holder's token is greater, so a
// fenced resource refuses the old holder's writes. See Replicas and
// failover for what prevents the loss on Sentinel and Cluster.
//
// Redis may also evict keys when it reaches maxmemory, holds included,
// unless maxmemory-policy is noeviction; use that policy on a server that
// holds locks.
//
// # Clients and contexts
//
// The driver never closes the client: whoever created it owns it. Once the
// client is closed, every call, Subscribe included, fails at once with a
// permanent error wrapping redis.ErrClosed, open subscriptions receive a
// value (their waiters' next call fails) and the pub/sub goroutine ends.
//
// A *redis.Client made with default options needs nothing more: the
// driver sends its commands, on the caller's goroutine, through a clone of
// it (Client.WithTimeout: the same pool and timeouts) that ends each call
// at its context's deadline, reached through a hook the driver adds to the
// client once, so that hooks added to the client before New still see the
// driver's commands (hooks added later do not). A ClusterClient or Ring
// cannot be cloned so: create it with ContextTimeoutEnabled: true, or the
// driver waits for each call that has a deadline on a goroutine of its
// own. A call that its deadline ended fails with an error wrapping the
// context's error; one whose context is already done fails at once. Over
// a *redis.Client the driver has at most PoolSize calls under way, and
// after a call timed out its calls wait for the answer to one PING, so a
// server that stopped answering costs a dial per PING, not per call.
//
// The subscriptions of one Driver's waiters share one [redis.PubSub] connection
// and one goroutine, both started by the first Subscribe and ended 200 ms
// after the last open subscription is closed (unless another Subscribe
// comes first), so that successive waits do not dial anew.
//
// # Internals: data layout
//
// Every Redis key of one lock carries the same cluster hash tag, so that
// all of them live in one hash slot and one script can use them together on
// Redis Cluster. The tag is the lock key with '%', '{' and '}' escaped as
// %25, %7B and %7D (and the empty key written as "%"), which is injective
// and never yields an empty tag. With the default prefix "locker:", lock
// key "orders/42" uses:
//
//	locker:{orders/42}:lock       STRING "<token>:<owner><data>", PX = TTL: the exclusive hold
//	locker:{orders/42}:fence      STRING the last token granted, until the clock passes it
//	locker:{orders/42}:readers    ZSET owner -> expiry in ms of Redis TIME: shared holds
//	locker:{orders/42}:tokens     HASH owner -> "<token><data>" of each shared hold
//	locker:{orders/42}:queue      ZSET owner -> arrival order and mode: the wait queue
//	locker:{orders/42}:queue-exp  ZSET owner -> expiry in ms of Redis TIME: queue entries
//	locker:{orders/42}:queue-data HASH owner -> "<data>" of queue entries that have some
//	locker:{orders/42}:queue-notify HASH owner -> pub/sub channel of the Driver that queued it
//	locker:{orders/42}:released   pub/sub channel, published on release
//
// Each Driver also has a pub/sub channel of its own, "<prefix>notify:<id>"
// with a random id, on which the handoffs to the owners it queued are
// published (see Internals: scripts).
//
// <data> is what a grant keeps besides its token and owner: nothing for an
// uncounted request without a value (so the layout of plain locks is
// unchanged), else ":<weight>:<limit>:<value>", with weight and limit 0
// for an uncounted request and the value's bytes as they are, last. A hold
// keeps the data of the request that got it; a queue entry keeps that of
// the request that made it, and a handoff copies it into the hold. So a
// value and a weight are stored inside their hold and go with it (its
// release, expiry or forced release): no key is ever left for them.
//
// The scripts get one key, the lock's base "<prefix>{<tag>}:" (here
// "locker:{orders/42}:"), which is never a key itself, and derive the
// names above from it by appending their suffix. All carry the hash tag of
// the base and so live in its hash slot: Redis Cluster routes the script by
// the base and lets it use the undeclared keys of that slot. Passing one
// key rather than eight keeps each call small.
//
// The queue's score is 2*arrival+mode, so that the queue keeps arrival
// order and tells shared entries from exclusive ones. Each shared holder
// has its own expiry and token, so a reader that dies expires on its own
// while others renew. Expired shared holds and queue
// entries are removed lazily by the scripts; the keys holding them carry a
// PEXPIRE no shorter than their longest-lived member, and the fence key
// expires a millisecond or two after the grant that wrote it (see Tokens),
// so nothing is left behind: once a released key's TTL has passed, the
// server keeps no key for it.
//
// # Internals: scripts
//
// All logic runs server-side in three Lua scripts, with Redis TIME as the
// clock of shared holds and queue entries and PX for the exclusive hold:
//
//   - acquire (TryAcquire, queued or not) drops expired shared holds and
//     queue entries, then: extends the hold of an owner that already holds
//     the key in the requested mode, keeping its token; or refuses, with
//     the remaining time of the conflicting holds, when another owner holds
//     the key in a conflicting mode (or the same owner in the other mode);
//     or refuses when the wait queue has live entries and the owner is not
//     its head (nor, for Shared, in the run of shared entries at its head),
//     with the remaining life of the entries ahead; or grants the key with
//     a new token (see Tokens), and removes the owner's queue
//     entry. A queued TryAcquire (Request.Queued), when refused, appends the owner to the queue
//     (or keeps its place) with an entry that expires after req.TTL.
//     A refused request flags the exclusive hold that refused it (a "w"
//     after the token in the lock's value), so that its release wakes
//     the waiters; it takes no token. When none of the lock, fence,
//     readers, queue and queue-exp keys exists, an exclusive request is
//     granted by a fast path that runs before the scripts' shared
//     prelude: EXISTS, TIME and SET. A second fast path refuses an
//     exclusive request (not queued) of an owner not in the queue when
//     another owner's hold is flagged already, the usual first attempt
//     of a waiter on a contended key: GET, PTTL, ZSCORE and, with a
//     queue, ZRANGE and TIME for its remaining time. A third refuses a
//     queued exclusive request without a value from an owner not yet in
//     the queue while another owner holds the key, the attempt of a
//     process that locks a contended key again: it flags the hold and
//     appends the owner to the queue without the prelude (13 commands).
//   - refresh (Refresh, RefreshBatch) extends the hold of l.Owner in l.Mode,
//     with token l.Token unless it is 0, and never re-creates a hold that
//     expired.
//   - release (Release) deletes that hold and removes the owner's queue
//     entry whatever it held. An exclusive hold that refused nobody is
//     released with GET, TIME and DEL, before the prelude, and publishes
//     nothing. A flagged exclusive hold, on a key without shared holds,
//     whose queue is empty or has a live exclusive entry at its head, is
//     released, and the key handed over, before the prelude too (14
//     commands for a handoff). Otherwise, when the release leaves the key free and the
//     queue has live entries, it hands the key over: it grants it to the
//     queue's head (or the run of shared entries at its head) with a new
//     token, for as long as their queue entries live, and publishes
//     "g<token>:<owner>" on the channel of the Driver that queued that
//     owner (queue-notify; on the key's channel when that Driver had not
//     confirmed its own yet, where the other Drivers ignore it), so that
//     no other process reads it: that Driver wakes its subscriptions of
//     the key and returns the grant from the owner's next
//     queued TryAcquire without a round trip (Lease.Start is
//     the send time of the request that last renewed the queue entry,
//     which the grant's expiry cannot precede). A queued request's
//     refusal reports a bound of every token granted so far, so that a
//     late announcement of an earlier grant to the same owner, with a
//     token up to it, is never taken for the new one. Other releases publish
//     "r" when they deleted a hold or a queue entry. acquire publishes
//     too when it drops expired queue entries, since the waiters behind
//     them may now proceed. refresh and release of a shared hold read the
//     clock only when the owner is among the readers.
//
// # Internals: semaphores and values
//
// A counted request (Request.Limit > 0, Mode Shared) is a shared hold that
// takes Request.Weight units of the key's limit. The acquire script grants
// it, in the same round trip as any request, when no one holds the key
// exclusively, the weights of the live shared holds plus its own are at
// most the limit, and the wait queue allows it: a request that is not in
// the queue waits behind a non-empty queue, and a queued one is granted
// only if every entry ahead of it is shared and their weights count
// against the limit too, so that a large request is not overtaken by
// small ones. Its LockedError.Remaining is the time until the first of
// what is in its way (the exclusive hold, the first shared hold to
// expire when the units are short, the entries ahead) may expire.
//
// The live shared holds and shared queue entries of a key all have the
// same limit: a shared request whose limit differs from theirs (uncounted
// ones have limit 0) is refused with a [driver.LimitError] that names
// theirs, and neither granted nor queued. The release of a counted hold
// hands the freed units over to the head of the queue, to the run of
// shared entries at its head as far as they fit; the first entry that
// does not fit ends the run. Each grant has a token of its own; a holder's
// re-acquire keeps its weight, value and token.
//
// A value (Request.Value, at most [driver.MaxValueLen] bytes of any
// content) is stored with the grant, exclusive or shared, and
// [Driver.Inspect] reports it, with the weights and the limit. An
// exclusive request with a value skips the acquire fast path, and its
// release the release fast path; both still take one round trip. Limits
// above 2^53, which Lua's numbers do not count exactly, are refused.
//
// # Internals: round trips
//
// Scripts are sent with EVALSHA (built by the driver, as few and small
// arguments as possible), and with EVAL once per script and server
// when the server answers NOSCRIPT (after a restart, a failover or SCRIPT
// FLUSH). TryAcquire (queued or not), Refresh and Release take one round
// trip each. RefreshBatch takes one round trip per 1000 leases (on
// Cluster, one per master and 1000 leases, in parallel), plus one more for
// the leases whose script the server did not have. With Options.Replicas,
// the WAIT goes in the same round trip, but a queued TryAcquire that a
// handoff granted takes one too (to be acknowledged). Subscribe takes one
// round trip when the key's channel is not yet subscribed by this driver
// (two when the driver's pub/sub connection is not open), none otherwise:
// a channel stays subscribed for 200ms after its last subscription closed,
// so that the waits of a process that locks a contended key again and
// again cost no SUBSCRIBE nor UNSUBSCRIBE. So on a contended key, each
// acquisition by a process of its own takes two round trips in all: the
// previous holder's release (which hands the key over) and the new
// holder's queued attempt, which joins the queue at once when the
// handle's previous lock waited in it (three when it did not: a refused
// attempt first); the handoff itself reaches the new holder on its
// driver's channel, read by no other process.
package redisdriver
