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
// # Internals
//
// All state lives under one mutex in the backend, so every operation is
// atomic. For each key the backend keeps:
//
//   - the holds of the key: one exclusive hold, or any number of shared
//     holds, each with its owner, fencing token, granted TTL and expiry
//     time;
//   - a fence counter that is never reset, not by release, not by expiry:
//     every grant, shared grants included, takes the next value, starting
//     at 1, so tokens of a key strictly increase whoever the owner;
//   - a wait queue (see queued requests in [Driver.TryAcquire] and [Driver.Acquire]);
//   - the key's live subscriptions (see [Driver.Subscribe]);
//   - the live loss watches of its holds (see [Driver.WatchLoss]).
//
// Because the fence counter must survive, the backend keeps a small record
// for every key it has ever seen; a backend is meant for tests and
// short-lived uses, not for an unbounded stream of distinct keys.
//
// Expiry is judged with [time.Now] on the backend. Expired holds and
// expired wait-queue entries are dropped lazily, by the next operation that
// touches the key (inspection with [Backend.Holders] and [Backend.Queued]
// included); nothing runs in the background. Subscribers are woken when a
// key is released, when [Backend.Expire] or [Backend.Revoke] ends its
// holds, when an entry leaves its wait queue, and when an operation finds
// and drops an expired hold or queue entry. A hold that merely runs out,
// with nobody touching the key, wakes no one at the moment it runs out:
// waiters rely on the front-end's timer, which is capped by
// [driver.LockedError.Remaining], and a waiting [Driver.Acquire] on a timer
// of its own. For the same reason a hold's loss watchers hear of its
// expiry only when an operation finds it expired; they hear of
// [Backend.Expire] and [Backend.Revoke] at once. Entries of the wait queue
// that belong to a waiting Acquire do not expire: the call keeps them
// until it returns.
//
// Ownership is checked by owner and mode: Refresh and Release act only on
// a hold of l.Key by l.Owner in l.Mode and, when l.Token is not 0, only if
// the hold's token is l.Token. An owner that holds a key in one mode and
// asks for it in the other gets an error wrapping [driver.ErrLocked] (a
// *[driver.LockedError] giving the remaining time of its own hold); the
// front-end never does that, since it uses a fresh owner for every hold.
//
// The driver accepts TTLs from [MinTTL] to [MaxTTL] and reports that range
// through [Driver.TTLRange]; a TTL outside it, or an unknown [driver.Mode],
// is refused with an error marked [driver.Permanent].
package memdriver
