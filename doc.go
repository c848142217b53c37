// Package locker provides distributed locks with the shape of package
// sync: Mutex, RWMutex and a reentrant mutex, shared by every process that
// uses the same key on the same backend (Redis, etcd, ZooKeeper, SQL
// databases, memcached, a quorum of independent servers, an in-process
// backend for tests, and more through package driver).
//
//	drv, err := redisdriver.New(rdb, nil) // rdb: a go-redis client
//	if err != nil {
//		return err
//	}
//	c := locker.New(drv)  // one Client per driver
//	defer c.Close(ctx)    // releases every hold it granted
//
//	m := c.Mutex("orders/42")
//	m.Lock()
//	defer m.Unlock()
//
// # Clients and handles
//
// A Client (New) owns what the locks of one driver share in a process:
// the line of local waiters per key, the watchdog that renews every hold,
// the background cleanup of abandoned calls, and default options. Handles
// come from it: Client.Mutex, Client.RWMutex and Client.ReentrantMutex.
// Client.Close ends every hold the Client granted (their Done channels
// close and Err reports ErrClosed), releases the leases, waits for the
// background work, and makes later calls fail with ErrClosed; call it when
// the process stops, for example when signal.NotifyContext reports
// SIGTERM, so that the keys are free at once rather than after their TTL.
//
// NewMutex, NewRWMutex and NewReentrantMutex are the sync-style entry
// points: each makes a handle with a Client of its own, which shares
// nothing with other handles of the process but the driver and needs no
// Close (it has no background work once unlocked). There is no hidden
// process-wide state: handles share a line, batched renewals and Close
// only when they come from one Client.
//
// # Holds
//
// Every grant of a key is a Hold: Mutex.Acquire and RWMutex.Acquire and
// RAcquire return it (TryAcquire without waiting), and the sync-style
// methods keep it in their handle. A Hold has the fencing Token, Done and
// Err, a Context that is cancelled when the hold ends (to run work under
// the lock), Refresh and Release. Each reader of an RWMutex has its own.
//
//	h, err := c.Mutex("reports/daily").Acquire(ctx)
//	if err != nil {
//		return err
//	}
//	defer h.Release(context.Background())
//	return build(h.Context(), h.Token()) // stops if the hold is lost
//
// # Semaphores, elections and multi-locks
//
// Three recipes are built on holds, so their grants are leases renewed by
// the watchdog, lost the same way, and fenced:
//
//   - Client.Semaphore(key, n): n permits, taken with a weight
//     (golang.org/x/sync/semaphore's Acquire, TryAcquire and Release, or
//     AcquireHold for the hold itself). Waiters are served in order without
//     barging: a request for many permits is not overtaken by later
//     requests for fewer. Every user of key must give the same n; another
//     n fails with ErrLimitMismatch instead of oversubscribing. Needs a
//     driver whose Capabilities report Counted.
//   - Client.Election(key): Campaign(ctx, value) returns leadership as a
//     hold whose token is the term, strictly greater than every earlier
//     leader's; Resign, Leader and Observe. A leader whose lease cannot be
//     renewed learns it before a successor can be elected. Needs
//     a driver whose Capabilities report Values and Inspect.
//   - Client.MultiLock(keys...): every key or none, locked in sorted order
//     so that overlapping sets never deadlock; one MultiHold with a token
//     per key, whose Done closes when any part ends. Works on every driver.
//
// For example:
//
//	s := c.Semaphore("exports", 3)
//	h, err := s.AcquireHold(ctx, 2) // 2 of the 3 permits
//	...
//	lead, err := c.Election("scheduler").Campaign(ctx, "node-a:8080")
//	...
//	mh, err := c.MultiLock("accounts/7", "accounts/9").Acquire(ctx)
//
// # Model
//
// A lock is a key on a backend. Locking it asks the backend, through a
// driver, for a lease: a grant of the key to an owner for a TTL (WithTTL,
// 15 seconds by default). Every hold has an owner token of 128 random bits
// that only this hold knows, so no other handle or process can release or
// renew it. While the hold lasts, the Client's watchdog renews the lease
// every third of the TTL, batching renewals that fall due together into
// one round trip where the driver can. With WithFixedLease there is no
// renewal: the hold ends at its TTL unless Hold.Refresh extends it. If the
// holder crashes, its lease runs out and the key is free again after at
// most the TTL.
//
// Mutex and RWMutex are handles with the semantics of their sync namesakes:
// Lock and Unlock satisfy sync.Locker, a second Lock on a handle waits for
// the first Unlock, and any goroutine may unlock. Context variants
// (LockContext, TryLockContext, UnlockContext, and the R forms) return
// errors; Lock retries transient backend errors and panics only on errors no
// retry can cure (a bad key or TTL, a driver without the needed capability,
// a closed backend client or Client). Unlock of a handle that is not locked
// panics as sync does.
//
// ReentrantMutex carries its owner in a context instead: the context Lock
// returns may lock the same key again, and N Locks need N Unlocks. An
// Unlock with a context that carries no hold panics, like an unlock of an
// unlocked sync.Mutex, so a misplaced context cannot leak a hold.
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
//     Loss closes the hold's Done channel and cancels its Context, sets
//     Err to an error wrapping ErrLost, calls the WithOnLost function, and
//     is reported by the next Unlock. It is never only a log line.
//   - One loss rule on every driver: a lost hold frees the key for the
//     other lock calls of the process at once, while the handle that lost
//     it still needs its Unlock (a second Lock on it waits, as on a
//     sync.Mutex that was not unlocked).
//   - Ownership: release and renewal compare the owner token on the
//     backend; a stale handle never releases or extends someone else's hold.
//   - Deadlines: every call that takes a context returns by its deadline,
//     even when the backend does not answer (drivers honour their
//     context; lockertest checks it). What an abandoned lock call may have
//     left on the backend (a grant whose reply was lost, a wait-queue
//     entry) is removed in the background on a fresh context bounded by
//     the TTL; later lock calls for that key through the Client, and
//     Client.Close, wait for it. TryLock and TryRLock, which take no
//     context, give up after the try timeout (WithTryTimeout, 1s).
//   - Closed clients: a backend client that was closed is a permanent
//     error, never retried: LockContext returns it, Lock panics with it.
//   - No leaks: after Unlock returns no renewal is sent for that hold, and
//     every goroutine the package starts ends once no hold is left and
//     the background cleanups are over (Close waits for them).
//
// # Waiting and fairness
//
// Within a Client, lock calls for the same key line up first come, first
// served (shared calls together), and only the head of the line talks to
// the backend: a hundred goroutines waiting for one key
// cost the backend one waiter (two on a driver with a queue of its own,
// driver.Acquirer: the goroutine after the holder already waits in the
// backend's queue, so that the handoff is the backend's notification). A
// releaser that locks again at once queues behind the goroutines already
// waiting.
//
// Across processes, a driver with a fair queue of its own
// (driver.Acquirer: etcd's create revisions, ZooKeeper's sequential nodes)
// waits in it: waiters are served strictly in arrival order. Otherwise
// waiters are woken by the backend when the driver notifies them
// (driver.Notifier: Redis pub/sub), and poll with exponential backoff
// (WithBackoff) capped by the holder's remaining lease when it does not.
// Drivers that report losses (driver.LossWatcher: ZooKeeper session expiry,
// etcd lease revocation) end a hold as soon as the backend reports it gone.
// As in sync.Mutex's starvation mode, a waiter that has waited longer than
// the fairness threshold (WithFairnessThreshold, 1ms by default) joins the
// backend's wait queue on drivers that keep one (driver.Request.Queued): newcomers,
// including a releaser that locks again at once, cannot overtake it.
//
// # Fencing
//
// Pass the hold's Token with every write to the protected resource, and have the
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
//	driver/memdriver       in-process backend for tests and demos, with fault hooks
//	driver/redisdriver     Redis through go-redis v9 (standalone, Sentinel, Cluster)
//	driver/etcddriver      etcd through its v3 client; token = create revision
//	driver/zkdriver        ZooKeeper through go-zookeeper; token = czxid
//	driver/sqldriver       PostgreSQL and MySQL/MariaDB through database/sql
//	driver/memcachedriver  memcached through gomemcache (exclusive only)
//	driver/quorumdriver    a majority of N independent drivers (Redlock)
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
// ErrClosed, ErrReentryLimit, ErrInvalidWeight, ErrLimitMismatch,
// ErrInvalidValue, ErrNoLeader, and ErrLocked from TryAcquire),
// errors.ErrUnsupported for a missing capability, the context's error, and
// the backend's own error types (driver.IsPermanent tells a closed backend
// client). Messages carry one "locker:" prefix and quote at most 64 bytes
// of a key.
// Keys must be non-empty valid UTF-8 without NUL bytes, at most MaxKeyLen
// bytes; any such key works on every driver, which encodes it for its
// backend. TTLs are never rounded: a TTL outside the driver's range is an
// error naming the limit.
//
// Errors that no call can return (backend errors from Unlock and TryLock,
// failed renewals before a loss, transient errors that Lock retries,
// failed background cleanups) go to the WithErrorHandler function; by
// default they are logged at level Warn to the WithLogger logger, or
// slog.Default().
//
// # Copying
//
// Lock handles must not be copied after first use; go vet's copylocks check
// reports copies. Clients and Holds are used through pointers.
package locker
