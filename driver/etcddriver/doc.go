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
// log, so they survive a leader election and restarts of members. An
// uncontended lock and unlock are one Txn and one Delete, the same two
// Raft writes as etcd's concurrency.Mutex, with no session to keep alive.
//
// etcd leases last whole seconds: a TTL must be a whole number of seconds,
// at least the cluster's minimum (1.5 election timeouts, rounded up: 2s
// with etcd's defaults), and is never rounded. New does no I/O: the
// driver's Capabilities report 1s until a grant shows that etcd raised a
// TTL (that lock call fails with an error naming the minimum, which the
// Capabilities report from then on), or Options.MinTTL when set. Every hold has an etcd lease of its own, so a
// hold whose process dies ends one TTL after its last renewal, and two
// holds in one process exclude each other.
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
// Every lease the driver grants carries a sentinel key that etcd deletes
// when, and only when, the lease ends (expires, or is revoked by anyone);
// one watch per Driver on its sentinels reports lost leases at once. A
// holder's etcd member may apply a revocation a little after the member
// that serves the next waiter does. So that the lost holder stops before
// the new one starts, a waiter granted a key because its holder's lease
// ended waits Options.LockDelay (default 250ms) before Acquire returns,
// like Consul's lock-delay; a grant after a release, and a newcomer's
// TryAcquire, are not delayed. An entry deleted by hand while its lease
// lives is not reported at once; the next renewal finds it gone.
//
// # Clusters
//
// The driver works through any member: writes go through Raft, reads that
// decide are linearizable, and keep-alives reach the leader. When a
// member fails, the client moves to another one: the keep-alive stream is
// replaced, the watches are opened again with WithRequireLeader (so that a
// member cut off from its cluster ends them) and their waiters read the
// queue again, and renewals fail until a new leader is elected, which the
// hold's TTL must outlast (etcd extends every lease by an election timeout
// when a new leader takes over). A waiter keeps its place in the queue
// through an election as long as its lease lives.
//
// # Rules of use
//
// All calls for one owner go through one Driver, as package locker makes
// them: the driver remembers the entries it made, and refuses a Refresh,
// Release or WatchLoss of an owner it has no entry of with
// driver.ErrNotHeld. Drivers that share locks must use the same
// Options.Prefix (DefaultPrefix, "locker/"); drivers with different
// prefixes must not use one inside the other's key space ("locker/" and
// "locker/orders%2F42/" would overlap). Lock keys are escaped so that no
// lock's key range contains another's: "a" and "a/b" are independent.
//
// The driver never closes the client: whoever created it owns it. Close
// stops the driver's goroutines (the watches and the keep-alive stream) and
// revokes the idle leases it keeps for reuse, for at most a second. Once
// the driver or the client is closed, every call fails at once with an
// error that driver.IsPermanent reports, and a call under way fails too.
// Every call returns by its context's deadline, whether or not etcd
// answers; a waiter whose context ends deletes its entry in the
// background.
//
// The keys of a lock, the grant rule, the lease pool, the requests of each
// call and how waiters watch are described in docs/etcddriver.md at the
// repository's root.
package etcddriver
