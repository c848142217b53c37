// Package etcddriver is a locker driver for etcd, over the user's
// [clientv3.Client] (go.etcd.io/etcd/client/v3).
//
//	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"localhost:2379"}})
//	if err != nil {
//		return err
//	}
//	d, err := etcddriver.New(cli, nil)
//	if err != nil {
//		return err
//	}
//	c := locker.New(d) // one Client per process, shared by every handle
//	defer c.Close(ctx)
//
//	h, err := c.Mutex("orders/42").Acquire(ctx)
//
// Every lock type works on it: RWMutex, ReentrantMutex, Semaphore,
// Election and MultiLock. Waiters on every client are served first come,
// first served, in the order etcd assigns cluster-wide (create revisions),
// and are woken by a watch, not by polling; a run of readers is served
// together, and a stream of readers cannot starve a writer. A hold whose
// lease etcd ends (expiry, revocation) is reported lost at once. Renewals
// due together go out in batches. Holds and tokens are in etcd's Raft
// log, so they survive a leader election and restarts of members.
//
// etcd leases last whole seconds: a TTL must be a whole number of seconds,
// at least the cluster's minimum (1.5 election timeouts, rounded up: 2s
// with etcd's defaults), and is never rounded (see Internals: leases).
//
// # Fencing
//
// A grant's fencing token is its entry's create revision: etcd's revision
// counter is cluster-wide and never goes back, so tokens grow across keys,
// clients, leader elections and restarts (as long as the cluster keeps its
// data), and a re-acquire by the same owner keeps the token.
//
// To make your own etcd writes conditional on still holding the lock,
// compare the entry's create revision with the token in the same
// transaction; [Driver.Cmp] builds the comparison for a hold the driver
// granted:
//
//	cmp, err := d.Cmp(m.Key(), uint64(m.Token()))
//	resp, err := cli.Txn(ctx).If(cmp).Then(clientv3.OpPut("orders/42/state", "paid")).Commit()
//	if err == nil && !resp.Succeeded {
//		// The hold is gone: nothing was written.
//	}
//
// This is the in-store fencing that Jepsen's lock-etcd-set workload uses,
// and exact: the compare fails as soon as the entry is gone, whoever holds
// the key next. Resources outside etcd check the token itself (see
// locker.Guard).
//
// # Losing a hold
//
// Besides its entries, every lease the driver grants carries a sentinel key
// that the driver never deletes: etcd deletes it when, and only when, the
// lease ends (expires, or is revoked by anyone). One watch per Driver on its
// sentinels reports lost leases to WatchLoss, so a holder needs no watch of
// its lock's keys, and a release (which deletes the entry, not the
// sentinel) is never mistaken for a loss.
//
// A holder's etcd member may apply a revocation a little after the member
// that serves the next waiter does. So that the lost holder stops before the
// new one starts, a waiter granted a key because its holder's lease ended
// waits Options.LockDelay (default 250ms) before Acquire returns, like
// Consul's lock-delay; a grant after a release, and a newcomer's
// TryAcquire, are not delayed. The waiter tells the two apart with one
// serializable read (its own member answers it without a Raft round) of
// the holder's sentinel at the revision of the holder's deletion: a lease's
// end deletes its sentinel in the same revision as its entries.
//
// An entry deleted by hand while its lease lives is not reported by
// WatchLoss; the next Refresh finds it gone.
//
// # Clusters
//
// The driver works through any member: writes go through Raft, reads that
// decide are linearizable, and keep-alives reach the leader (a follower
// forwards them). When a member fails, the client moves to another one:
// the keep-alive stream is replaced (also when a keep-alive goes unanswered
// for 3s), the watches are opened again with WithRequireLeader (so that a
// member cut off from its cluster ends them rather than leaving them
// silent) and their waiters read the queue again, and renewals fail until
// a new leader is elected, which the hold's TTL must outlast (etcd extends
// every lease by an election timeout when a new leader takes over). A
// waiter keeps its place in the queue through an election as long as its
// lease lives.
//
// # Rules of use
//
// All calls for one owner go through one Driver, as package locker makes
// them (see package driver): the driver remembers the entries it made, and
// refuses a Refresh, Release or WatchLoss of an owner it has no entry of
// with driver.ErrNotHeld, leaving that owner's hold in place. Drivers that
// share locks must use the same prefix; drivers with different prefixes
// must not use one prefix inside the other's key space ("locker/" and
// "locker/orders%2F42/" would overlap).
//
// The driver never closes the client: whoever created it owns it. Close
// stops the driver's goroutines (the watches and the keep-alive stream) and
// revokes the idle leases of the pool, for at most a second; closing the
// client ends the goroutines too. Once the driver or the client is closed,
// every call fails at once with an error that driver.IsPermanent reports,
// instead of clientv3 retrying a request of a closed client until its
// context ends; a call under way fails too: a waiting Acquire returns, a
// Subscription's channel receives a value so that its next attempt fails,
// and a TryAcquire or Refresh fails when its request ends (a Release under
// way reports the release it made). A call whose context is already done
// fails at once, without a request; every call returns by its context's
// deadline, whether or not etcd answers.
//
// # Internals: data layout
//
// A lock key is escaped ('%' as %25, '/' as %2F) and ends with a '/', so that
// no lock's key range contains another's: "a" and "a/b" are independent,
// where etcd's concurrency.Mutex on prefixes "a/" and "a/b/" would make "a"
// wait for holders of "a/b". With the default prefix "locker/", lock key
// "orders/42" uses:
//
//	locker/orders%2F42/w/<lease>    an exclusive entry (holder or waiter)
//	locker/orders%2F42/r/<lease>    a shared entry (holder or waiter)
//	locker/orders%2F42/s/<lease>    a counted shared entry (a semaphore's)
//	locker/%leases/<driver>/<lease> the sentinel of a lease of the driver's
//
// Every hold and every waiter is one entry: a key attached to an etcd lease
// of its own, named by that lease's ID (16 hex digits), whose value is
// "<driver>/<owner>" (the ID of the Driver that made it, 16 hex digits, and
// the owner) or, for a counted entry or one with a value (Request.Value),
//
//	<driver>/<owner> NUL <limit> "," <weight> NUL <value>
//
// with the limit and the weight in decimal (0 and 0 for an uncounted
// entry) and the value's bytes to the end. "%leases" cannot be a lock's
// escaped key, which has '%' only in "%25" and "%2F".
//
// One rule decides every grant, in create-revision order: an exclusive
// entry is granted when no entry has a lower create revision; a shared one
// when every entry with a lower create revision is shared and, for a
// counted one (Request.Limit > 0), their weights and its own add up to at
// most its limit. Granted entries are thus always the first ones, and a
// waiter of 3 units on a semaphore of 4 is not overtaken by newcomers of 1
// unit, who count its weight although it does not hold yet. A free key is
// granted at once, in the transaction that puts the entry. Shared entries
// must agree on the limit (an uncounted one has limit 0): a request that
// disagrees with an older entry fails with an error wrapping a
// *[driver.LimitError], and the entry it may have put is deleted. As "s/"
// sorts between "r/" and "w/", an uncounted shared entry reads the counted
// and exclusive entries in one range.
//
// Entry keys name the lease rather than the owner because leases are
// reused (see Internals: leases): a key locked over and over reuses a few
// etcd keys instead of leaving a tombstone per hold in etcd's index, which
// every range read of the lock would walk until the next compaction.
//
// # Internals: leases
//
// Every entry has a lease of its own, with the hold's TTL: a hold whose
// process dies ends one TTL after its last renewal, and readers of one key
// expire independently. Two holds never share a lease, so they exclude each
// other even in one process on one client (etcd's concurrency.Mutex keys its
// entry by the session's lease, so two mutexes on one session both own the
// lock). Leases are granted on demand (LeaseGrant, plus the sentinel's Put)
// and kept in a pool per TTL when their entry is released: a lock+unlock
// loop grants one lease, once. etcd raises a TTL below its minimum without
// saying so; a grant whose TTL etcd raised fails with an error naming the
// minimum, which the driver reports in its Capabilities from then on (see
// Options.MinTTL), so that package locker refuses such TTLs before any
// I/O.
//
// The driver keeps no lease alive on its own: leases are renewed when
// package locker's watchdog calls Refresh (and, for a waiter, by Acquire
// while it waits), on one bidirectional LeaseKeepAlive stream per Driver,
// which etcd answers on the leader without a Raft round. A renewal proves
// that the lease lives its TTL from the moment it was sent, which is what
// the front-end counts from.
//
// # Internals: operations and round trips
//
//   - TryAcquire: one transaction, If(no conflicting entry) Then(Put entry),
//     with a keep-alive of a pooled lease alongside unless the lease was
//     proved less than a tenth of the TTL ago (by the previous hold in a
//     lock+unlock loop; the grant then carries Lease.Start). An owner with
//     an entry (a re-acquire, or a queued owner at the head) also reads it
//     and the oldest conflicting one, and keeps its token; a counted
//     request puts its entry either way and reads all the lock's entries,
//     and a refused one deletes it again unless it queues (Request.Queued).
//     LockedError.Remaining is 0: the leases in the way are not read.
//   - Acquire: the same transaction, which also reads the older conflicting
//     entries; then a wait on the key's watch, sending only a keep-alive
//     every third of the TTL; granted by a predecessor's lease ending, one
//     serializable Range for the lock delay. Its grant carries Lease.Start,
//     so the front-end needs no confirming Refresh.
//   - Refresh: a linearizable Get of the entry (owner and token checked),
//     with a keep-alive alongside; RefreshBatch, one read-only transaction
//     per 100 leases, concurrently, and the keep-alives at once.
//   - Release: one Delete of the entry with its previous value (whose token
//     is checked); the lease goes back to the pool.
//   - Inspect: one range read, and one TimeToLive per holder.
//
// An uncontended Lock+Unlock pair is therefore one Txn and one Delete, the
// same two Raft writes as concurrency.Mutex, without a session to keep
// alive in the background; a contended handoff within one driver is two
// Raft writes per acquisition (the waiter's Txn and its Delete).
//
// # Internals: waiting
//
// A waiter reads the older entries that concern it once, when it queues;
// as new entries get higher revisions, that set only shrinks, and the
// waiter is granted, without reading again, as soon as the watch has
// reported enough of them deleted (all for an uncounted waiter; for a
// counted one, every exclusive one and enough weight that its own fits).
// Its entry lives on its own lease, which it renews while it waits; if the
// entry vanishes (etcd-io/etcd#11456 and the #9921, #19597 family, where
// etcd's own lock granted an expired waiter the lock), Acquire returns an
// error, never the lock. A waiter whose context ends returns at once and
// deletes its entry in the background (within 10s, or until the driver or
// its client is closed).
//
// Each Driver watches a lock's key range with one etcd watch, shared by its
// waiters and subscriptions of that key, and kept Options.WatchLinger after
// its last user. The watch is opened without a start revision, so etcd
// counts it as synced and sends every later event as it happens; the
// driver waits for its created reply before it reads the queue, so no
// deletion is missed. (A watch opened at an earlier revision gets its
// events from etcd's 100 ms resync loop whenever anything was written
// since: that is why concurrency.Mutex hands a contended lock over at most
// once per resync; BENCHMARKS.md has the measurements.)
package etcddriver
