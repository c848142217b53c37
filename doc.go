// Package locker provides distributed locks with the shape of package sync
// — Mutex, RWMutex, a reentrant mutex, and semaphores, elections and
// multi-locks built on them — shared by every process that uses the same
// key on the same backend: Redis, etcd, ZooKeeper, PostgreSQL, MySQL,
// memcached, a quorum of independent servers, or an in-process backend for
// tests (the driver/... packages).
//
// Make one Client per process and driver, and handles from it wherever a
// lock is needed:
//
//	c := locker.New(drv) // drv from redisdriver.New, etcddriver.New, …
//	defer c.Close(ctx)   // releases every hold it granted, at once
//
//	m := c.Mutex("orders/42")
//	h, err := m.Acquire(ctx) // returns by ctx's deadline
//	if err != nil {
//		return err
//	}
//	defer h.Release(ctx)
//	return pay(h.Context(), h.Token()) // stops if the hold is lost; the token fences writes
//
// # Clients and handles
//
// A Client (New) owns what the locks of one driver share in a process:
// the line of local waiters per key, the watchdog that renews every hold
// in batches, the background cleanup of abandoned calls, and default
// options. Handles are cheap: Client.Mutex, Client.RWMutex,
// Client.ReentrantMutex, Client.Semaphore, Client.Election and
// Client.MultiLock. Client.Close ends every hold the Client granted, releases
// the leases, waits for the background work, and makes later calls fail
// with ErrClosed; call it when the process stops (for example when
// signal.NotifyContext reports SIGTERM) so that other processes get the
// keys at once rather than after their TTL.
//
// NewMutex, NewRWMutex and NewReentrantMutex are the sync-style
// shortcuts: their handles lock through the default Client of their
// driver, one per driver value in the process, made by the first lock call
// and kept while a lock call, hold or cleanup uses it; an idle one is left
// to the garbage collector, with its timer stopped. So
// NewMutex handles over one driver, made per request in a handler or
// anywhere else, share a line per key and batched renewals, and keep
// nothing alive once unlocked. The default Client has no options: a
// shortcut handle has the options given to it, all of them (WithLogger and
// WithObserver included) applying to that handle alone. It has no Close
// either: make a Client with New for options shared by every handle and
// for Close at shutdown. The handles of a Client and the shortcut handles
// of the same driver are in two lines, which exclude each other through
// the backend as two processes do. A driver value that cannot be a map
// key (its type is not comparable) gets a Client of its own per lock call.
//
// Mutex and RWMutex have the semantics of their sync namesakes: Lock and
// Unlock satisfy sync.Locker, a second Lock on a handle waits for the first
// Unlock, any goroutine may unlock, and Unlock of a handle that is not
// locked panics. The context forms (LockContext, TryLockContext,
// UnlockContext and the R forms) return errors; Lock retries transient
// backend errors and panics only on errors no retry can cure. A
// ReentrantMutex carries its owner in a context, and so has methods of
// other names: the context Enter returns may enter the hold again, N
// Enters need N Leaves, and a Leave with a context that carries no hold
// panics, so a misplaced context cannot leak a hold.
//
// Unlike sync.Mutex, no type of this package that talks to a backend is
// usable as a zero value: it needs a driver, which only its constructor
// gives it. A zero Mutex, Client, Semaphore, Hold and so on fails every
// call that returns an error with one wrapping ErrZeroValue, naming the
// type and its constructors, and the sync forms panic with it. Keep
// handles in struct fields as pointers made by a Client (mu
// *locker.Mutex), not as values. Guard is the exception: its zero value is
// ready to use.
//
// # Forms
//
// Every lock type offers the same forms, with the same result shapes:
//
//	sync     Lock()  Unlock()  TryLock() bool
//	context  LockContext(ctx) error  UnlockContext(ctx) error  TryLockContext(ctx) (bool, error)
//	hold     Acquire(ctx) (*Hold, error)  TryAcquire(ctx) (*Hold, error)
//
// Mutex and MultiLock (whose hold is a *MultiHold) have all of them, and
// RWMutex has them on both sides (RLock, RUnlock, TryRLock, RLockContext,
// RUnlockContext, TryRLockContext, RAcquire, TryRAcquire). A try that
// returns a bool reports a taken key as false; one that returns a value
// reports it as an error wrapping ErrLocked, since it has no value to
// return. Semaphore has the hold forms only, with a weight (a grant of
// permits is released through its Hold); Election has Campaign, its
// Acquire, and Resign; ReentrantMutex, whose context is its owner rather
// than only a deadline, has Enter(ctx) (context.Context, error),
// TryEnter(ctx) (context.Context, error) and Leave(ctx) error, the context
// in place of the hold. Each type's documentation says why.
//
// # Holds
//
// Every grant of a key is a Hold: Mutex.Acquire and RWMutex.Acquire and
// RAcquire return it (TryAcquire and TryRAcquire without waiting), and the
// sync-style methods keep it in their handle. A Hold has the fencing Token, Done and
// Err, a Context that is cancelled when the hold ends (to run work under
// the lock), Refresh and Release. Each reader of an RWMutex has its own.
//
// A hold is a lease: a grant of the key for a TTL (WithTTL; DefaultTTL;
// at least MinTTL).
// While it lasts, the Client's watchdog renews it every third of the TTL
// (WithRenewInterval). With WithFixedLease there is no renewal: the hold
// ends at its TTL unless Hold.Refresh extends it. If the holder crashes,
// the key is free again after at most the TTL.
//
// # Recipes
//
// Three recipes are built on holds, so their grants are leases renewed by
// the watchdog, lost the same way, and fenced:
//
//   - Client.Semaphore(key, n): n permits, taken with a weight by Acquire
//     and TryAcquire, each grant a Hold whose Release gives its permits
//     back (golang.org/x/sync/semaphore across processes). Waiters are
//     served in order without
//     barging: a request for many permits is not overtaken by later
//     requests for fewer. Every user of key must give the same n; another
//     n fails with ErrLimitMismatch instead of oversubscribing.
//   - Client.Election(key): Campaign(ctx, value) returns leadership as a
//     hold whose token is the term, strictly greater than every earlier
//     leader's; Resign, Leader and Observe; Latch keeps campaigning (see
//     "Scheduled jobs"). A leader whose lease cannot be renewed learns it
//     before a successor can be elected.
//   - Client.MultiLock(keys, opts...): every key or none, locked in sorted order
//     so that overlapping sets never deadlock; one MultiHold with a token
//     per key, whose Done closes when any part ends.
//
// For example:
//
//	s := c.Semaphore("exports", 3)
//	h, err := s.Acquire(ctx, 2) // 2 of the 3 permits
//	...
//	lead, err := c.Election("scheduler").Campaign(ctx, "node-a:8080")
//	...
//	mh, err := c.MultiLock([]string{"accounts/7", "accounts/9"}).Acquire(ctx)
//
// MultiLock works on every driver; Semaphore and Election need a driver
// that can count shared holds and keep a value with a hold, and fail with
// an error wrapping errors.ErrUnsupported on one that cannot.
//
// # Scheduled jobs
//
// A job scheduled on every replica of a service must run once per tick,
// yet replicas' clocks disagree by milliseconds: with a plain lock, a
// replica whose clock is late takes the key after the first has finished
// and runs the tick again. Two recipes avoid it, for any scheduler:
//
//   - Once per tick: lock a key named by the job and its scheduled time,
//     cron/<job>/<tick in unix seconds>, with TryAcquire and
//     WithMinHold(d) (d within the TTL): the key stays held for d after
//     the grant even when the job ends sooner, and Client.Close does not
//     shorten it (it releases the key at the end of d, and waits for
//     that), so a late replica finds it held and skips the tick. d
//     must exceed the clock disagreement plus scheduling jitter (seconds
//     are plenty: the key is never wanted again). One key per job,
//     without the tick, works too if d is also shorter than the interval
//     between ticks (ShedLock's lockAtLeastFor).
//   - One leader: Election.Latch starts a LeaderLatch that campaigns for
//     the life of a context and campaigns again after a loss; the
//     scheduler asks IsLeader at each tick. A leader that dies is replaced
//     within its TTL; the ticks in between run nowhere.
//
// Module github.com/go-locker/locker/gocronlock implements both for
// github.com/go-co-op/gocron/v2 (its Locker and Elector).
//
// # Guarantees
//
// No lease-based lock can promise mutual exclusion on an asynchronous
// network: a holder that is paused (by a garbage collector, a stopped
// process, a slow disk) can outlive its lease without knowing. locker
// promises the following, and its conformance suite (package lockertest)
// checks them on every driver:
//
//   - Exclusion while the lease is valid: at most one exclusive holder of a
//     key, and shared holders only with other shared holders.
//   - Fencing: every grant carries a Token strictly greater than every
//     token granted before it for that key, never 0, unchanged on reentry.
//   - Timely loss detection: a holder that is not paused learns that its
//     hold is lost before the backend can grant the key to anyone else. The
//     Client keeps a local deadline on the monotonic clock — the send time
//     of the last confirmed acquire or renewal, plus the TTL, minus a safety
//     margin (a tenth of the TTL, at least min(20ms, TTL/4)) — and declares
//     the hold lost when it passes, whatever a pending renewal is doing. A
//     loss closes Done, cancels the hold's Context, sets Err to an error
//     wrapping ErrLost, calls the WithOnLost function, and is reported by
//     the next Unlock. It frees the key for the process's other lock calls
//     at once; the handle that lost it still needs its Unlock.
//   - Ownership: release and renewal compare a 128-bit random owner token
//     on the backend; a stale handle never touches someone else's hold.
//   - Deadlines: every call that takes a context returns by its deadline,
//     even when the backend does not answer (drivers honour their
//     context; lockertest checks it). What an abandoned lock call may have
//     left on the backend (a grant whose reply was lost, a wait-queue
//     entry) is removed in the background on a fresh context bounded by
//     the TTL; later lock calls for that key through the Client, and
//     Client.Close, wait for it. So is a release that failed with a
//     transient error (a connection broken by a leader change), until it
//     lands or the lease is gone; a release call that has not answered
//     after a fifth of the TTL is sent again, so that one stuck on a dead
//     leader does not hold the key for a TTL. TryLock and TryRLock, which
//     take no context, give up after the try timeout (WithTryTimeout, 1s).
//   - Closed clients: a backend client that was closed is a permanent
//     error, never retried: LockContext returns it, Lock panics with it,
//     TryLock reports false at once and passes it to the error handler.
//   - No leaks: after Unlock returns no renewal is sent for that hold, and
//     the package's goroutines end once no hold is left.
//
// What each backend keeps across its own restarts and failovers is in each
// driver's package documentation; the faults tested, and their results,
// in SAFETY.md.
//
// # Waiting and fairness
//
// Within a Client, lock calls for a key line up first come, first served
// (shared calls together), and only the head of the line talks to the
// backend: a hundred goroutines waiting for a key cost the backend one
// waiter (two where the backend has a queue of its own, so that the next
// in line already waits in it). A releaser that locks again at once
// queues behind them.
//
// Across processes, waiters wait in the backend's own fair queue where it
// has one (etcd, ZooKeeper); otherwise they are woken by the backend when
// it can notify (Redis pub/sub, PostgreSQL NOTIFY) and poll with
// exponential backoff (WithBackoff) capped by the holder's remaining lease
// when it cannot. A poller that has waited twice the longest backoff polls
// every twenty-fifth of it (10ms by default): without a queue, a
// contended key is free only between a release and its holder's next
// lock call, and slow polls would rarely see that moment. As in sync.Mutex's starvation mode, a waiter that has
// waited longer than WithFairnessThreshold joins the backend's wait queue
// where there is one: newcomers, a releaser that locks again included,
// cannot overtake it. A handle whose last lock call waited in that queue,
// less than a second before, joins it from its next call's first attempt:
// a process that locks a contended key again is refused no plain attempt
// first. A backend that reports a lease gone (ZooKeeper
// session expiry, etcd lease revocation) ends the hold at once.
//
// # Fencing
//
// Pass the hold's Token with every write to the protected resource, and
// have the resource refuse a write whose token is lower than the highest
// it has accepted. In one process, a Guard does that. In SQL, keep the
// highest token next to the data and make the write conditional on it:
//
//	UPDATE accounts SET balance = $1, fence = $2
//	WHERE id = $3 AND fence <= $2
//
// and treat zero rows affected as a stale token. In a store with
// transactions and compare operations, compare the stored fence in the
// same transaction as the write. Tokens are comparable only within one key
// and one backend.
//
// # Drivers
//
// A driver implements driver.Driver: three atomic operations (try to
// acquire, refresh, release), plus optional capabilities. This module's:
//
//	driver/memdriver       in-process backend for tests and demos, with fault hooks
//	driver/redisdriver     Redis through go-redis v9 (standalone, Sentinel, Cluster)
//	driver/etcddriver      etcd through its v3 client
//	driver/zkdriver        ZooKeeper
//	driver/sqldriver       PostgreSQL and MySQL/MariaDB through database/sql
//	driver/memcachedriver  memcached through gomemcache (exclusive only)
//	driver/quorumdriver    a majority of N independent drivers (Redlock)
//
// To write one, implement package driver's interfaces and run
// lockertest.TestDriver against it.
//
// # Errors
//
// Every error from a lock call is an *Error that names the operation and
// the key and wraps the cause, so errors.Is and errors.As see through it to
// the sentinels of this package (ErrInvalidKey, ErrInvalidTTL,
// ErrInvalidOption, ErrNilDriver, ErrNilContext, ErrZeroValue, ErrNotHeld,
// ErrLost, ErrClosed, ErrReentryLimit, ErrInvalidWeight, ErrLimitMismatch,
// ErrInvalidValue, ErrNoLeader, and ErrLocked from the tries that return a
// value), errors.ErrUnsupported for a missing capability, the context's
// error, and the backend's own error types (driver.IsPermanent tells a
// closed backend client). Messages carry one "locker:" prefix, name the
// operation and the key once, in that prefix (a driver's error keeps its
// driver's name and cause: `locker: lock "orders/42": redisdriver: …`),
// and quote at most 64 bytes of a key. A Guard refuses a stale token
// with an error wrapping ErrStaleToken.
//
// Keys must be non-empty valid UTF-8 without NUL bytes, at most MaxKeyLen
// bytes; any such key works on every driver, which encodes it for its
// backend. TTLs are never rounded: a TTL outside the driver's range is an
// error naming the limit.
//
// Errors that no call can return (backend errors from Unlock and TryLock,
// failed renewals before a loss, transient errors Lock retries, failed
// background cleanups) go to the WithErrorHandler function; by default
// they are logged at level Warn to the WithLogger logger, or
// slog.Default(), a run of them at a time: the first at once, then at most
// one line every 5 seconds, and one line when the backend answers again,
// so that an outage is a few lines rather than one per retry. WithObserver
// reports every lock call, failed renewal, error and end of hold, for
// metrics and traces.
//
// # Copying
//
// Lock handles must not be copied after first use; go vet's copylocks check
// reports copies. Clients, handles and Holds are used through the pointers
// their constructors return.
package locker
