// Package quorumdriver is a locker driver over N independent member
// drivers, in the manner of Redlock: a key is granted when a majority of
// the members grant it, so any minority of members may fail, restart or be
// cut off without dropping a hold. The members are usually redisdriver
// drivers over N standalone Redis servers ([NewRedis]), but any drivers
// that can raise their token floor will do ([New]: memdriver backends in
// tests, or a mix).
//
//	clients := make([]redis.UniversalClient, len(addrs))
//	for i, addr := range addrs {
//		clients[i] = redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
//	}
//	d, err := quorumdriver.NewRedis(clients, nil)
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
// timeout, not the TTL. When fewer than a majority answer within it (a
// stalled process or network rather than one member down), the members
// that did not are asked once more, until TTL/3 after the first requests.
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
// A grant's token is the highest its majority granted (for a re-acquire
// by the holder, the token a majority of those answering still hold),
// written back to a majority before the grant is reported. Any later majority shares a
// member with it, so a successor whose requests were sent after the grant
// was reported gets a larger token, without any assumption about clocks,
// as long as that member kept its floor (a Redis member keeps it until its
// own clock passes it). Tokens can repeat only when every member shared
// by two majorities lost its floor (a restart without persistence, a
// failover to a replica that missed the write-back, FLUSHALL, eviction)
// and its clock lags that of the member that set the earlier token by
// more than the time between the two grants.
//
// # What it assumes
//
// Mutual exclusion needs what Redlock needs: each member counts a TTL at
// most [Drift](TTL) shorter than the client does over the lease, the
// client's pauses stay within the front-end's safety margin, and members
// do not lose holds (a member restarted empty while a hold lives gives a
// minority a second chance: with N = 3, a restart of one member during a
// hold lets a second owner take the restarted member and the third, while
// the first still believes it holds; run Redis with AOF appendfsync
// always, or keep a restarted member out for one TTL, to exclude it). A
// holder paused beyond its lease can still act after another owner was
// granted the key; only fencing by token stops its writes. See SAFETY.md.
//
// Concurrent attempts may each get a minority; the attempt that holds the
// key's priority member (picked by a hash of the key) asks the members
// that refused it again, briefly, while the others give theirs back, so a
// contended key is not lost to split votes.
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
// How each call counts its majority, the validity of a grant, give-backs
// in doubt, and why tokens increase are described in docs/quorumdriver.md
// at the repository's root.
package quorumdriver
