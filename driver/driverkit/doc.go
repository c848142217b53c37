// Package driverkit holds what the drivers of package
// github.com/go-locker/locker/driver have in common, for the authors of
// drivers: the drivers of this module use it, and third-party drivers may
// too. It is not part of the contract: a driver that passes
// lockertest.TestDriver is correct whether or not it uses the kit. Each
// name below has a user among this module's drivers; the few with one
// user are there for third-party drivers too, and say so.
//
// # Errors
//
// [Errors] names a driver's errors, an [OpError] each (the driver, the
// operation, the key and the cause), and makes those of a closed driver
// or client permanent errors wrapping driver.ErrClosed, as the contract
// asks: a driver sets one up when it is made and returns Errors.Wrap from
// every method that fails, and starts each call with Errors.Begin.
// [Closed] is that marking alone, for a driver that names its errors
// itself. [CheckCount] checks the counted fields of a request again; the
// contract says a driver need not, and it is kept only until the drivers
// that still call it stop.
//
// # Calls and retries
//
// [Call] makes a request to a client that takes no context return by the
// context's deadline, and hands what the abandoned request did to a
// function that can take it back. [Backoff] spaces the retries of a loop
// that a driver runs on its own behalf (a reconnect, a re-subscribe),
// never those of a call: the front-end retries calls.
//
// # Keys
//
// An [Escaper] percent-encodes a lock's key into a name that a backend
// with a restricted alphabet accepts (an etcd key segment, a ZooKeeper
// node, a memcached key), and decodes it back; [Unhex] decodes the
// escapes alone, for a driver whose names follow rules of their own on
// top (zkdriver's tests, a third-party driver).
//
// # Grants, batches and waiting
//
// [Admit] applies the grant rule of a fair queue to a [Claim] (a hold or
// waiter's mode and count) given the claims ahead of it, for a driver
// that keeps its queue itself (etcd revisions, ZooKeeper sequential
// nodes). [Chunks] splits a batch (a RefreshBatch's leases) into runs
// that fit one request. [Fanout] keeps the subscriptions of a driver's
// notifier, each a [FanoutSub], and wakes them; [LossCallback] (made by
// [NewLossCallback]) holds the function a driver calls once when it
// learns that a lease was lost.
//
// # Caches
//
// An [LRU] (made by [NewLRU]) bounds what a driver remembers to save
// requests; [Contention] remembers the keys refused lately, for a
// TryAcquire that reads before it writes on a contended key (zkdriver; a
// third-party driver over a backend whose refused writes cost more than
// reads). A driver keeps either only where a benchmark shows what it buys.
package driverkit
