// Package driverkit holds what the drivers of package
// github.com/go-locker/locker/driver have in common, for the authors of
// drivers: the drivers of this module use it, and third-party drivers may
// too. It is not part of the contract: a driver that passes
// lockertest.TestDriver is correct whether or not it uses the kit.
//
// # Errors
//
// [OpError] names the driver, the operation and the key of a failed call
// and wraps its cause; [Closed] marks the errors of a closed driver or
// client permanent; [CheckCount] checks the counted fields of a request
// before any I/O.
//
// # Calls and retries
//
// [Call] makes a request to a client that takes no context return by the
// context's deadline, and hands what the abandoned request did to a
// function that can take it back; [Backoff] spaces the retries of a loop.
//
// # Keys
//
// An [Escaper] percent-encodes a lock's key into a name that a backend
// with a restricted alphabet accepts (an etcd key segment, a ZooKeeper
// node, a memcached key), and decodes it back; [Unhex] decodes for a
// driver whose names follow extra rules.
//
// # Waiting and loss
//
// [Fanout] keeps the subscriptions of a driver's notifier and wakes them;
// [LossCallback] holds the function a driver calls once when it learns
// that a lease was lost.
//
// # Caches
//
// An [LRU] bounds what a driver remembers to save requests; [Contention]
// remembers the keys refused lately, for a TryAcquire that reads before it
// writes on a contended key. A driver keeps either only where a benchmark
// shows what it buys.
package driverkit
