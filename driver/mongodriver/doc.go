// Package mongodriver is a locker driver for MongoDB (and FerretDB), over
// the user's [mongo.Client] (go.mongodb.org/mongo-driver/v2) and a
// collection they name, whose safety rests on one operation only: the
// insert of a document whose _id must be unique.
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
//	_ = d.CreateIndex(ctx) // at startup, by every process; optional
//
//	c := locker.New(d) // one Client per process, shared by every handle
//	defer c.Close(ctx)
//	h, err := c.Mutex("orders/42").Acquire(ctx)
//
// Every lock type works on it: Mutex, RWMutex (shared holds, each
// expiring on its own), ReentrantMutex, Semaphore (counted holds),
// Election (values, read with Inspect) and MultiLock. Waiters poll (see
// Waiting): notification of releases, a blocking Acquire and reports of
// lost leases need the server to push, which FerretDB cannot (no change
// streams). A wait queue across processes, batched renewals and token
// floors could be carried by the same versions but are not implemented.
// TTLs are from [MinTTL] (2 seconds) to [MaxTTL], in microseconds.
//
// # Why not findAndModify
//
// The classic MongoDB lock takes a key's document with a conditional
// findOneAndUpdate (free or expired: set the owner, $inc the fence) and
// releases it with deleteOne({_id, owner}). On MongoDB each is atomic. On
// FerretDB, which the tests run against, findAndModify, update and delete
// are a query followed by a separate write by _id: racers that take over
// the same expired lock all win, and a stale owner's delete removes the
// new holder's lock (TestNaiveLockOverlaps shows it). The one operation
// FerretDB performs atomically is an insert whose _id exists: it fails
// with a duplicate key error (E11000). This driver is built on that alone,
// so what the tests verify is what users get on MongoDB too.
//
// # Guarantees, and the operation each rests on
//
// Each change of a key (acquire, refresh, release, force release) reads
// the key's current version, a document holding the key's whole state,
// and inserts the next version, whose _id is the key and the version's
// number. Documents are never updated. docs/mongodriver.md has the
// details.
//
//   - Exclusion (one exclusive holder; shared holders only together;
//     counted holders within their limit): the unique _id of version v+1.
//     Of the writers that read version v, one inserts v+1; the others get
//     E11000 and read again. A writer then reads the current version
//     again and counts its change only if it is there (a writer whose
//     read predates the deletion of old versions may insert a number
//     that was freed, below the current version: that insert changes
//     nothing).
//   - Owner-checked refresh and release: the same insert. A lease that is
//     not in the current version is never extended or released again.
//   - Fencing tokens: max(fence+1, the server's clock in microseconds),
//     the fence kept in every version. Tokens increase across releases
//     and expiries (the fence) and across the deletion of a key's
//     documents or a restart (the server's clock, which must not step
//     back by more than the time between two grants of a key).
//     TestTokensNeverReset checks all four, and that the design whose
//     token is $ifNull(token, 0)+1 on a document that release deletes
//     fails the check.
//   - Expiry: judged on the server's clock, read with the hello command
//     at most once a second, never on a client's wall clock. A lease's end
//     is written with an upper bound of that clock and judged with a lower
//     bound, so a hold is dropped only after its holder's local deadline;
//     the price is that a lease may last on the server a round trip longer
//     than its TTL.
//
// # What a real deployment needs
//
// The tests run against one FerretDB process; a replica set adds what
// FerretDB cannot show:
//
//   - Write concern majority. The driver sets w: "majority", read concern
//     "majority" and primary reads on its collection handle, whatever the
//     client's defaults. An insert acknowledged by a primary alone can be
//     rolled back after a failover, undoing a grant or a release after its
//     caller was told of it. FerretDB accepts and ignores both concerns.
//   - Replica set elections. A deposed primary cannot acknowledge a
//     majority write, so a writer that still talks to it gets an error,
//     never a grant. An insert whose reply is lost in an election has an
//     unknown outcome: the error is returned, and the front-end retries
//     with the same owner (a grant is idempotent) or releases what the
//     attempt may have left.
//   - Clocks. After a failover the new primary's clock is measured within
//     a second; the members' clocks must agree within the front-end's
//     safety margin (NTP keeps them within milliseconds).
//
// # Waiting
//
// FerretDB has no change streams, and its tailable cursors end at once
// (a tailable awaitData find on a capped collection returns cursor id 0),
// so waiters cannot learn of a release from the server. They poll: the
// front-end's exponential backoff, each sleep capped by the refusal's
// driver.LockedError.Remaining, the time left of the hold in the way (of
// the first to end, for a counted request). A refused TryAcquire is one
// read and writes nothing. Waiters within one process are served in order
// by the front-end; waiters in different processes are not. Change
// streams could wake waiters on MongoDB; that is not implemented, so that
// the driver behaves the same on both servers.
//
// # Growth and cost
//
// A key that has been used keeps one document: after each change, a
// goroutine of the driver deletes the versions below the new one. A
// released key's document holds its fence. Deleting the documents of keys
// no longer used is safe while nobody holds or waits for them (tokens then
// rest on the clock); the driver never does it. A change takes three
// round trips (read, insert, read), two when the driver made the key's
// last change (it starts from the version it read then); racing writers
// retry after a random pause, a TryAcquire up to 8 times before it
// reports the key locked.
//
// On FerretDB over SQLite every read scans the collection (it uses no
// index for them), and a database is one file that takes one writer at a
// time: keep the lock collection small, in a database of its own. On
// MongoDB, CreateIndex makes each read one index seek.
//
// # Contexts and Close
//
// Every call returns by its context's deadline, and a TryAcquire, Refresh
// or Release also within its lease's TTL: a request whose reply a network
// fault swallowed is abandoned (the MongoDB driver closes its connection)
// and the front-end retries. An insert that was sent may still be
// applied; the front-end's cleanup Release removes a grant whose reply
// was lost. [Driver.Close] ends the driver: calls under
// way return at once, every later call returns a permanent error wrapping
// [ErrClosed]. Close never disconnects the client; a disconnected
// client's errors are marked permanent too.
package mongodriver
