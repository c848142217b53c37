// Package mongodriver is a locker driver for MongoDB, over the user's
// [mongo.Client] (go.mongodb.org/mongo-driver/v2) and a collection they
// name, whose safety rests on one operation only: the insert of a
// document with a unique _id.
//
//	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://db.internal/?replicaSet=rs0"))
//	if err != nil {
//		return err
//	}
//	d, err := mongodriver.New(client, nil) // collection locker.locker_locks
//	if err != nil {
//		return err
//	}
//	defer d.Close()
//	_ = d.CreateIndex(ctx) // once per process at startup; optional
//
//	c := locker.New(d) // one Client per process, shared by every handle
//	defer c.Close(ctx)
//	h, err := c.Mutex("orders/42").Acquire(ctx)
//
// Every lock type works on it: Mutex, RWMutex (shared holds, each
// expiring on its own), ReentrantMutex, Semaphore (counted holds),
// Election (values, read with Inspect) and MultiLock. What it cannot
// carry, and why, is under Waiting: notification of releases, a wait
// queue across processes, a blocking Acquire.
//
// # Why not findAndModify
//
// The classic MongoDB lock is a conditional findOneAndUpdate: take the
// key's document if its expiry has passed, with $inc on a fence. On
// MongoDB that is one atomic operation. On FerretDB, the server the tests
// of this package run against (MongoDB's wire protocol over SQLite),
// findAndModify, update and delete are a query followed by a separate
// write by _id: two clients that take over the same expired lock both
// succeed, and a stale owner's delete({_id, owner}) deletes the new
// holder's lock. TestNaiveLockOverlaps shows it on the server the tests
// start. What FerretDB does perform atomically is an insert whose _id
// already exists: it fails with a duplicate key error (E11000), whatever
// the concurrency. This driver is built on that operation alone, so what
// the tests verify here is what users get on MongoDB too.
//
// # Design: versions inserted, never updated
//
// Each change of a key inserts a new document, the key's next version,
// holding the key's whole state: its holds (owner, mode, token, end of
// lease, TTL, limit, weight, value) and its fence (the highest token
// granted). Version v of key "orders/42" has _id "<v in base 36>:orders/42"
// and fields k (the key) and v (the number). The current version is the
// one with the highest v. A change (acquire, refresh, release, force
// release) reads the current version v, computes the next state, and
// inserts it as version v+1. Of all the writers that read version v, only
// one can insert v+1: the others get E11000 and read again. The insert is
// a compare-and-swap on the version number, made of an operation FerretDB
// performs atomically. No document is ever updated.
//
// After its insert, a writer deletes the versions below its own, so a key
// keeps one document (two for a moment) however often it is used, and
// reads the current version again. That read closes the one gap of the
// scheme: a writer whose read is older than the deletion of version v+1
// could insert v+1 again. Its insert then succeeds, but the key's current
// version is a later one, which does not contain the writer's change, and
// the writer counts the change as not made (and tries again). A change is
// in force only when the current version read after the insert contains
// it: the grant or renewal with an end no earlier than the one written, or
// no trace of the released hold.
//
// Which operation each guarantee rests on:
//
//   - Exclusion (one exclusive holder; shared holders only with each
//     other; counted holders within their limit): the unique _id of the
//     next version. Every state of a key was computed from the state
//     before it and only one successor of each is ever current.
//   - Owner-checked refresh and release: the same insert. A release of a
//     lease that is not in the current version writes nothing and returns
//     driver.ErrNotHeld; a stale release inserts a version that is not
//     current and changes nothing.
//   - Fencing tokens: a grant's token is max(fence+1, the server's clock
//     in microseconds), and the fence is carried by every version. Tokens
//     increase across releases and expiries (the fence is kept in the
//     released key's document) and across the deletion of every document
//     of the key or a server restart (the clock: tokens then rest on the
//     server's clock not stepping back by more than the time between two
//     grants of the key). TestTokensNeverReset checks all four.
//   - Expiry: a hold's end is written on the server's clock, as an upper
//     bound of that clock when the holder's own lease ends; a writer drops
//     a hold once a lower bound of the server's clock has passed its end.
//     Both bounds come from the hello command's localTime (see
//     Clock below). No client's wall clock is used.
//
// # Clock
//
// The driver reads the server's clock with the hello command at most once
// a second. A reply that took from local instant s to r, carrying server
// time S, bounds the server's clock at a later local instant L between
// S+(L-r) and S+1ms+(L-s) (localTime has whole milliseconds), widened by
// 1000 ppm of the measurement's age. Lease ends are written with the upper
// bound and judged with the lower one, so a hold is dropped only after its
// holder's local deadline has passed, however far the clients' wall
// clocks are from the server's. The cost is that a lease lasts on the
// server up to a round trip (of the hello) longer than its TTL.
//
// # Cost
//
// A change takes three round trips: read the current version, insert the
// next, then (concurrently) read the current version again and delete the
// older ones; plus a hello once a second. A refused TryAcquire takes one
// (the read): it writes nothing. Racing writers retry, with a random pause
// of up to 2^attempt ms, up to 8 times; a TryAcquire that loses every race
// reports the key as locked, and a Refresh or Release returns an error the
// front-end retries.
//
// # Waiting
//
// FerretDB has no change streams, and tailable cursors on its capped
// collections end at once (verified against v1.24.2: the cursor id of a
// tailable awaitData find is 0), so waiters cannot learn of a release from
// the server. They poll: the front-end's exponential backoff, each sleep
// capped by the driver.LockedError.Remaining of the refusal, which is the
// time left of the hold in the way (of the first to end, for a counted
// request). A refused TryAcquire is one read, so polling costs the server
// one indexed find per waiter per backoff step. For the same reason there
// is no wait queue across processes (Capabilities.Queue) and no blocking
// Acquire: waiters in one process are served in order by the front-end,
// waiters in different processes are not. On MongoDB, change streams on
// the collection could wake waiters; that is not implemented, so that the
// driver behaves the same on both servers.
//
// # What a real deployment needs
//
// The tests run against one FerretDB process; a MongoDB deployment adds
// replication, which FerretDB cannot show:
//
//   - Write concern majority. The driver sets w: "majority" (and read
//     concern "majority", primary reads) on its collection handle,
//     whatever the client's defaults. An insert acknowledged by a primary
//     alone can be rolled back after a failover, which would undo a grant
//     or a release after its caller was told it happened. FerretDB
//     accepts and ignores write and read concerns.
//   - Replica set elections. A deposed primary cannot acknowledge a
//     majority write, so a writer that still talks to it gets an error,
//     never a grant. An insert whose acknowledgement is lost (a timeout
//     during an election) has an unknown outcome: the driver returns the
//     error and the front-end retries with the same owner (a grant is
//     idempotent) or releases what the attempt may have left.
//   - Clocks. Lease ends are on the clock of the primary the driver last
//     measured; after a failover, the new primary's clock is measured
//     within a second, and the members' clocks must agree within the
//     margin the front-end keeps before a lease's end (NTP keeps them
//     within milliseconds).
//
// The driver needs no schema: the collection is created by the first
// insert. CreateIndex adds the index on {k: 1, v: -1} that makes reading a
// key's current version one index seek.
//
// # Growth
//
// A key that has been used keeps one document, its current version,
// after every change: a released key's document holds no hold and its
// fence, which is what keeps its tokens increasing without the clock.
// Deleting the documents of keys no longer used is safe while nobody
// holds or waits for them (tokens then rest on the clock); the driver
// never does it.
//
// # Contexts and Close
//
// Every call returns by its context's deadline (the MongoDB driver
// honours contexts); an insert that was sent may still be applied, and the
// front-end's cleanup Release removes a grant whose reply was lost.
// [Driver.Close] ends the driver: calls under way return at once, every
// later call returns a permanent error wrapping [ErrClosed]. The client
// is the caller's: Close never disconnects it; a disconnected client's
// errors are marked permanent too.
package mongodriver
