// Package quorumdriver is a locker driver over N independent member
// drivers, in the manner of Redlock: a key is granted when a majority of
// the members grant it, so any minority of members may fail, restart or be
// cut off without dropping a hold. The members are usually redisdriver
// drivers over N standalone Redis servers, but any drivers that can raise
// their token floor will do (memdriver backends in tests, or a mix).
//
//	members := make([]driver.Driver, len(addrs))
//	for i, addr := range addrs {
//		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
//		if members[i], err = redisdriver.New(rdb, nil); err != nil {
//			return err
//		}
//	}
//	d, err := quorumdriver.New(members, nil)
//	if err != nil {
//		return err
//	}
//	c := locker.New(d) // one Client per process, shared by every handle
//	defer c.Close(ctx)
//
//	h, err := c.Mutex("orders/42").Acquire(ctx)
//
// The members must be independent: two members on one server, or on
// servers that replicate each other, count twice for one failure. Every
// call goes to every member at once and waits for each at most a member
// timeout ([Options.MemberTimeout]; by default TTL/10, at least 25ms, at
// most TTL/3), so a member that is down or black-holed costs a call that
// timeout, not the TTL.
//
// What the locks can do depends on the members: read locks (RWMutex) when
// every member offers them; waiters woken by a release, and a fair wait
// queue, when every member offers them (each member keeps its own queue;
// with a member down, waiters poll). Semaphores and elections are not
// offered: each member would count its own majority's grants, and two
// majorities' holders could together exceed a semaphore's size. Renewals
// go to the members one lease at a time. The TTLs accepted are those every
// member accepts, and at least [MinTTL].
//
// A grant's token is the highest its majority granted, written back to a
// majority before the grant is reported, so tokens keep increasing across
// restarts of members while their clocks agree to within the outage (see
// the Internals sections).
//
// # What it assumes
//
// Mutual exclusion needs what Redlock needs: each member counts a TTL at
// most Drift(TTL) shorter than the client does over the lease, the
// client's pauses stay within the front-end's safety margin, and members
// do not lose holds (a member restarted empty while a hold lives gives a
// minority a second chance: with N = 3, a restart of one member during a
// hold lets a second owner take the restarted member and the third, while
// the first still believes it holds; run Redis with AOF appendfsync
// always, or keep a restarted member out for one TTL, to exclude it). A
// holder paused beyond its lease can still act after another owner was
// granted the key; only fencing by token stops its writes. See SAFETY.md.
//
// # Errors
//
// An error is permanent (driver.Permanent)
// when more than N − majority members failed permanently, as after their
// clients were closed: no retry can then reach a majority. A failed
// call's error lists what each failed member answered ([MemberErrors]),
// without wrapping those answers: errors.Is and driver.IsPermanent report
// what the quorum decided, never what one member said, so that a
// minority's "not held" does not end the front-end's cleanup while other
// members still keep a queue entry. The driver never closes the members'
// clients; whoever built them does.
//
// # Internals: requests
//
// Every call goes to every member at once, with the same owner string (the
// front-end's, unique per hold), with member tokens of 0 (each member's
// token differs), and waits for all replies, each bounded by the member
// timeout.
//
//   - TryAcquire (queued or not) grants the key when a majority
//     granted it and took the grant's token (see Internals: tokens) within the
//     lease's validity: the TTL, counted from the moment the first member
//     request was sent, minus the time the requests took and minus a
//     clock-drift allowance of TTL/100 + 2ms ([Drift]). A member's grant
//     that began before the request (its Lease.Start: a handoff to a
//     queued owner lives only as long as the queue entry it replaced)
//     counts from its own start; the grant counts from the latest moment
//     at or after which a majority of the members holding it began theirs. The lease it
//     returns has the requested TTL and Lease.Start set to that start
//     minus the allowance, so the front-end counts the lease from there.
//     An attempt that reached fewer than a majority releases what it got,
//     at once and in parallel (unless its context is done: the front-end
//     then releases in the background), each member's grant by its token.
//     A release whose answer did not come back in time may still reach
//     its member later and delete a grant of the owner's next attempt; so
//     until that member is known to have dropped the grant (a release of
//     it answered, or a grant with another token), its grant or renewal
//     with that token does not count for the owner. The attempt fails with a
//     *driver.LockedError, whose Remaining is the longest that any member
//     reported, when a member refused because of another owner.
//   - Split votes: concurrent attempts may each get a minority and all
//     give up. To avoid that, the attempt that holds the key's priority
//     member (a hash of the key picks it; at most one attempt can hold it)
//     asks the members that refused it again, with pauses of 1 to 8ms, for
//     at most one member timeout (and TTL/4), while the others release
//     theirs. When the priority member is down, split votes can leave
//     every attempt refused, and the front-end's retry settles it.
//   - Refresh succeeds when a majority renewed the lease within its
//     validity (TTL minus elapsed minus the allowance). It fails with an
//     error wrapping driver.ErrNotHeld when more than N − majority members
//     report that the owner no longer holds the key: no majority can be
//     renewed, and the hold is lost. Any other failure is transient: the
//     front-end retries, and its local deadline (counted from the send
//     time of the last confirmed renewal) declares the hold lost. Members
//     that no longer hold the lease are not re-granted it.
//   - Release goes to every member. It returns an error wrapping
//     driver.ErrNotHeld when more than N − majority members did not hold
//     the lease, so that no majority did (it had expired there, although a member whose grant came later may still
//     have held its part, which is released all the same), nil when a
//     majority is known not to hold it any more and one of them released
//     it, and a transient error when fewer than a majority answered.
//
// # Internals: tokens
//
// Each member has its own token counter (for Redis, its clock), so the
// maximum of a majority's tokens is not monotonic by itself: two
// majorities may share only a member whose counter is behind. The grant's
// token T is the maximum of the tokens its majority granted, and before
// the grant is reported T is written back to members
// that granted a lower one, as many as it takes to make a majority (then
// to the others, if some of those failed): the member's hold takes T as
// its token, and every token the member grants later exceeds T. The grant
// is reported only when a majority W holds T this way (the members whose
// own token was T, and those whose write-back returned nil, which they do
// only while the owner still holds the key there).
//
// Why tokens increase. Let G1 be a grant with token T1 and confirming
// majority W, and G2 a later grant of the key to another owner, with
// granting majority M and token T2. W and M intersect in a member m.
//
//   - If G2's member requests were sent after G1 was reported (the case
//     fencing is for: a holder that lost its lease, perhaps while
//     paused, and its successor), m granted G2's owner after its
//     write-back of T1, so m's token for G2 exceeds T1, and T2, the
//     maximum over M, does too. This needs no clock and no timing
//     assumption, only that m kept its floor.
//   - If the requests of two exclusive grants overlap in time, each
//     member serves them one after the other. Under the timing
//     assumptions below, each grant's holds on its majority overlap at the
//     moment it is reported, so every common member serves them in the
//     same order; on a common member of W1 and M2 that serves G1 first,
//     G1's write-back found G1's hold alive, hence came before G2's grant
//     there, and T2 > T1 (symmetrically T1 > T2 in the other order).
//
// So tokens of exclusive grants increase in the order of the grants, and
// a holder that lost its lease (and was paused past it) presents a lower
// token than its successor, which a fenced resource refuses.
// An idempotent re-acquire by the holder returns the same token when the
// same members answer (they return T); when a member that missed the
// grant grants it now, the token may grow, never shrink (the new majority
// contains a member that returns T).
//
// What it assumes of the members: that a member whose write-back returned
// nil keeps its floor. memdriver keeps its counter for the backend's
// lifetime. redisdriver keeps T in the hold and in the key's fence key
// until the member's clock passes T (see token floors in
// redisdriver.Driver.TryAcquire),
// which needs only that the member's clock does not step back: the
// members' clocks need not agree. A member whose clock is ahead of the
// others makes their fence keys live for as long as the difference.
//
// When tokens can repeat or go back: when every member of W ∩ M lost its
// floor before granting G2 (a restart without persistence, a failover to
// a replica that missed the write-back, FLUSHALL, an eviction under a
// maxmemory policy other than noeviction) and, on Redis members, their
// clocks at G2's grant do not exceed T1 either. T1 is within microseconds
// of the clock of the member of G1's majority whose clock was ahead, so
// with clock-based members this needs a restarted member whose clock lags
// that member's by more than the time from G1 to G2 (which includes the
// restart). Members on one host, or on hosts whose clocks agree to within
// the shortest outage, keep tokens increasing across restarts of any
// number of members (the tests restart one member at a time and all
// three). memdriver members restarted as new backends restart their
// counters at 0: their tokens repeat unless a member that kept its floor
// is in the new majority.
package quorumdriver
