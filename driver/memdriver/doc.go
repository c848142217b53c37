// Package memdriver is the in-process backend of package locker: for
// tests of code that takes locks, with fault hooks, and for coordinating
// goroutines of one process. It needs no server.
//
//	c := locker.New(memdriver.New())
//	defer c.Close(ctx)
//
//	h, err := c.Mutex("orders/42").Acquire(ctx)
//	if err != nil {
//		return err
//	}
//	defer h.Release(ctx)
//
// It does everything the driver contract allows (shared holds, semaphores
// and elections, a fair wait queue whose waiters are woken at once, loss
// reports, batched renewals), in the most direct way, so it is also the
// implementation to compare other drivers against when the contract's
// wording leaves a doubt. Tokens are a counter per key, starting at 1,
// kept for the backend's lifetime.
//
// # Backends and drivers
//
// [NewBackend] creates an empty backend; [Backend.Driver] returns a new
// client of it. Clients of one backend see the same locks, and each client
// has its own fault hooks, so a test can, for example, partition one
// "process" from the server with [Driver.Block] while another carries on.
// [New] is a shortcut for a single client of a fresh backend; its backend
// is reachable with [Driver.Backend]. Backends share nothing with each
// other: the package has no global state.
//
// # Fault hooks
//
// A [Driver] has three hooks that change how its calls reach the backend.
// They apply to TryAcquire (queued or not, and with a token floor),
// Acquire, Refresh, RefreshBatch, Release and Subscribe (WatchLoss,
// Subscription.Close and Capabilities are never affected), in this order:
//
//  1. If ctx is already done, the call returns ctx.Err(), wrapped, and
//     nothing else happens.
//  2. While the driver is blocked ([Driver.Block]), the call waits until
//     [Driver.Unblock] or until ctx is done; in the latter case it returns
//     ctx.Err(), wrapped, without touching the backend.
//  3. If failures are pending ([Driver.FailNext]), the call consumes one
//     and returns the injected error, wrapped, without touching the
//     backend.
//  4. The call is applied to the backend and counted in [Backend.Stats]
//     (an Acquire then waits in the key's queue, whatever the hooks do
//     meanwhile).
//  5. If lost replies are pending ([Driver.LoseReplies]) and the call
//     changes state (every call above but Subscribe), the call consumes one
//     and returns an error wrapping [ErrReplyLost] instead of its result,
//     although its effect on the backend stays.
//
// A RefreshBatch call is one round trip: it consumes at most one failure or
// lost reply, which then becomes the error of every lease of the batch.
//
// The [Backend] has hooks of its own: [Backend.Expire] ends every hold of a
// key at once, as if its TTL had run out, and [Backend.Revoke] ends one
// owner's hold, as an administrator revoking a lease would; either makes
// the holder's next Refresh fail with [driver.ErrNotHeld] and is reported
// at once to the hold's loss watchers; [Backend.Holders] and
// [Backend.Queued] show the live holds and wait queue of a key, for tests
// that check that nothing is left held or queued; [Backend.Stats] and
// [Backend.Calls] count the operations that reached the backend, for tests
// that check, say, that waiters do not poll.
//
// # Tests with testing/synctest
//
// The package reads time only through [time.Now] and timers, starts no
// goroutine but one per loss report (which ends once the watcher's callback
// returns), and keeps no global state, so a backend works inside a
// [testing/synctest] bubble, where time is fake and leases expire without
// real waiting. Like
// any value that holds channels, a backend (with its drivers and
// subscriptions) must then be created and used within one bubble.
//
// # Expiry and ownership
//
// Expiry is judged with [time.Now] on the backend, and expired holds and
// wait-queue entries are dropped lazily, by the next operation that
// touches the key (inspection with [Backend.Holders] and [Backend.Queued]
// included); nothing runs in the background. So a hold that merely runs
// out, with nobody touching the key, wakes no waiter and no loss watcher
// at that moment: waiters rely on the front-end's timer, capped by
// [driver.LockedError.Remaining], and a waiting [Driver.Acquire] on a
// timer of its own. [Backend.Expire] and [Backend.Revoke] are reported at
// once. Every grant takes the next value of the key's fence counter,
// which is never reset, so the backend keeps a small record for every key
// it has ever seen: it is meant for tests and short-lived uses, not for an
// unbounded stream of distinct keys.
//
// Refresh and Release act only on a hold of l.Key by l.Owner in l.Mode
// and, when l.Token is not 0, only if the hold's token is l.Token. An
// owner that holds a key in one mode and asks for it in the other gets an
// error wrapping [driver.ErrLocked]; the front-end never does that, since
// it uses a fresh owner for every hold.
//
// The driver accepts TTLs from [MinTTL] to [MaxTTL] and reports that range
// through [Driver.Capabilities]; a TTL outside it, or an unknown [driver.Mode],
// is refused with an error marked [driver.Permanent].
package memdriver
