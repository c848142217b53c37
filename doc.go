// Package locker provides distributed locks with the shape of package
// sync: Mutex, RWMutex and a reentrant mutex, shared by every process that
// uses the same key on the same backend (Redis, an in-process backend for
// tests, and more through package driver).
//
//	drv, err := redisdriver.New(rdb, nil) // rdb: a go-redis client
//	if err != nil {
//		return err
//	}
//	m := locker.NewMutex(drv, "orders/42")
//	m.Lock()
//	defer m.Unlock()
//
// # Model
//
// A lock is a key on a backend. Locking it asks the backend, through a
// driver, for a lease: a grant of the key to an owner for a TTL (WithTTL,
// 15 seconds by default). Every hold has an owner token of 128 random bits
// that only this hold knows, so no other handle or process can release or
// renew it. While the hold lasts, a watchdog renews the lease every third of
// the TTL; one goroutine per driver does it for all the process's holds,
// batching renewals that fall due together into one round trip where the
// driver can. If the holder crashes, its lease runs out and the key is free
// again after at most the TTL.
//
// Mutex and RWMutex are handles with the semantics of their sync namesakes:
// Lock and Unlock satisfy sync.Locker, a second Lock on a handle waits for
// the first Unlock, and any goroutine may unlock. Context variants
// (LockContext, TryLockContext, UnlockContext, and the R forms) return
// errors; Lock retries transient backend errors and panics only on errors no
// retry can cure (a bad key or TTL, a driver without the needed capability).
// Unlock of a handle that is not locked panics as sync does.
//
// ReentrantMutex carries its owner in a context instead: the context Lock
// returns may lock the same key again, and N Locks need N Unlocks.
//
// # Guarantees
//
// No lease-based lock can promise mutual exclusion on an asynchronous
// network: a holder that is paused (by a garbage collector, a stopped
// process, a slow disk) can outlive its lease without knowing. locker
// promises the following, and its conformance suite (package lockertest)
// checks it for every driver:
//
//   - Exclusion while the lease is valid: at most one exclusive holder of a
//     key, and shared holders only with other shared holders.
//   - Fencing: every grant carries a Token strictly greater than every
//     token granted before it for that key, never 0, unchanged on reentry.
//     A resource that rejects tokens lower than the highest it has seen is
//     safe even when exclusion is not (see Fencing below).
//   - Timely loss detection: a holder that is not paused learns that its
//     hold is lost before the backend can grant the key to anyone else. The
//     front-end keeps a local deadline on the monotonic clock: the send time
//     of the last confirmed acquire or renewal, plus the TTL, minus a safety
//     margin (a tenth of the TTL, at least min(20ms, TTL/4)). When it passes
//     without a confirmed renewal, the hold is lost, whatever the pending
//     renewal call is doing. A renewal the backend rejects ends it at once.
//     Loss closes the handle's Done channel, sets Err to an error wrapping
//     ErrLost, calls the WithOnLost function, and is reported by the next
//     Unlock. It is never only a log line.
//   - Ownership: release and renewal compare the owner token on the
//     backend; a stale handle never releases or extends someone else's hold.
//   - Cancellation: a lock call that returns an error leaves nothing held or
//     queued on the backend; its cleanup runs on a fresh, bounded context.
//   - No leaks: after Unlock returns no renewal is sent for that hold, and
//     every goroutine the package starts ends once no hold is left.
//
// # Waiting and fairness
//
// Within a process, lock calls for the same key on the same driver line up
// first come, first served (shared calls together), and only the head of
// the line talks to the backend: a hundred goroutines waiting for one key
// cost the backend one waiter (two on a driver with a queue of its own,
// driver.Acquirer: the goroutine after the holder already waits in the
// backend's queue, so that the handoff is the backend's notification). A
// releaser that locks again at once queues behind the goroutines already
// waiting.
//
// Across processes, a driver with a fair queue of its own
// (driver.Acquirer: etcd's create revisions, ZooKeeper's sequential nodes)
// waits in it: waiters are served strictly in arrival order. Otherwise
// waiters are woken by the backend when the driver implements
// driver.Notifier (Redis pub/sub), and poll with exponential backoff
// (WithBackoff) capped by the holder's remaining lease when it does not.
// Drivers that implement driver.LossWatcher (ZooKeeper session expiry,
// etcd lease revocation) end a hold as soon as the backend reports it gone.
// As in sync.Mutex's starvation mode, a waiter that has waited longer than
// the fairness threshold (WithFairnessThreshold, 1ms by default) joins the
// backend's wait queue on drivers that implement driver.Queuer: newcomers,
// including a releaser that locks again at once, cannot overtake it.
//
// # Fencing
//
// Pass Mutex.Token with every write to the protected resource, and have the
// resource refuse a write whose token is lower than the highest it has
// accepted. In one process, a Guard does that. In SQL, keep the highest
// token next to the data and make the write conditional on it:
//
//	UPDATE accounts SET balance = $1, fence = $2
//	WHERE id = $3 AND fence <= $2
//
// and treat zero rows affected as a stale token. In a store with
// transactions and compare operations (etcd, a key-value store with
// check-and-set), compare the stored fence in the same transaction as the
// write. Tokens are comparable only within one key and one backend; they
// are as durable as the backend's data (see each driver's documentation).
//
// # Drivers
//
// A driver implements driver.Driver: three atomic operations (try to
// acquire, refresh, release), plus optional capabilities discovered by
// type assertion. Drivers in this module:
//
//	driver/memdriver    in-process backend for tests and demos, with fault hooks
//	driver/redisdriver  Redis through go-redis v9 (standalone, Sentinel, Cluster)
//	driver/etcddriver   etcd through its v3 client; token = create revision
//	driver/zkdriver     ZooKeeper through go-zookeeper; token = czxid
//
// To write a driver, implement the interfaces in package driver and run
// lockertest.TestDriver against it.
//
// # Errors
//
// Every error from a lock call is an *Error that names the operation and
// the key and wraps the cause, so errors.Is and errors.As see through it to
// the sentinels of this package (ErrInvalidKey, ErrInvalidTTL,
// ErrInvalidOption, ErrNilDriver, ErrNilContext, ErrNotHeld, ErrLost,
// ErrLocked, ErrReentryLimit), errors.ErrUnsupported for a missing
// capability, the context's error, and the backend's own error types.
// Keys must be non-empty valid UTF-8 without NUL bytes, at most MaxKeyLen
// bytes; any such key works on every driver, which encodes it for its
// backend. TTLs are never rounded: a TTL outside the driver's range is an
// error naming the limit.
//
// Errors that no call can return (backend errors from Unlock and TryLock,
// failed renewals before a loss, transient errors that Lock retries) go to
// the WithErrorHandler function, log/slog by default.
//
// # Copying
//
// Lock handles must not be copied after first use; go vet's copylocks check
// reports copies.
package locker
