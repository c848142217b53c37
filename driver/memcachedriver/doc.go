// Package memcachedriver is a locker driver for memcached, over a
// gomemcache [memcache.Client]: the classic cache lock, memcached's add
// with an expiration time, made owner-checked and fenced. Use it for
// advisory locks whose loss is harmless: memcached keeps nothing on disk,
// replicates nothing, and can evict.
//
//	mc := memcache.New("localhost:11211")
//	mc.MaxIdleConns = 16 // at least the calls you expect at once
//	d, err := memcachedriver.New(mc, nil)
//	if err != nil {
//		return err
//	}
//	defer d.Close()
//
//	c := locker.New(d) // one Client per process, shared by every handle
//	defer c.Close(ctx)
//	h, err := c.Mutex("orders/42").Acquire(ctx)
//
// Run memcached with -M, and not with -C; see Eviction below.
//
// Holds are exclusive only (no RWMutex read side, semaphores or
// elections; see Shared mode). memcached cannot tell anyone that an item
// was deleted or expired, so waiters poll with backoff, each wait capped
// by the holder's remaining lease, and it has no queue: waiters in
// different processes are not served in order. TTLs are whole seconds,
// from [MinTTL] (3 seconds) to [MaxTTL] (30 days less 2 seconds), never
// rounded, and a hold may outlive its TTL by up to 3 seconds (memcached's
// clock counts whole seconds). The tests run against memcached 1.6
// (Debian's package).
//
// # Eviction
//
// memcached is a cache: when its memory is full it evicts the least
// recently used items to make room, holds included. A hold that is
// evicted lets another client acquire the key while its holder still
// believes it holds it, which no renewal can detect in time. Run
// memcached with -M (--disable-evictions): it then refuses writes with
// "SERVER_ERROR out of memory" instead, which the driver returns as an
// error (not permanent: memory may free up) and never as a grant; a
// holder whose renewals are refused loses its hold by its local deadline.
// A full memcached refuses even an add of a key that exists; TryAcquire
// then reads the hold and reports a conflict when it is someone else's.
// Give memcached memory for its cache and the locks, or a server of its
// own for the locks.
//
// memcached started with -C (no CAS) returns CAS id 0 and would make every
// compare-and-swap succeed: the driver refuses to work with it, with a
// permanent error.
//
// # Several servers
//
// A client of several servers picks one per item key with its selector,
// so the hold and the counter of a lock may live on different servers.
// That is safe as long as every client uses the same servers in the same
// order: a key whose items move to another server (a changed list, a
// selector that skips a server that is down) can be held twice. memcached
// does not replicate: a server that fails loses its holds and counters,
// as a restart does.
//
// # Tokens and restarts
//
// The fence counter is created, on first use of a key and whenever it is
// missing, with the current Unix time in microseconds; later grants
// increment it. memcached keeps nothing on disk: a restart loses every
// hold (their holders learn it at their next renewal) and every counter,
// and so do flush_all and, without -M, evictions. Tokens still keep
// increasing across such a loss, under two assumptions: a key is granted
// fewer than a million times per second on average (each grant takes
// four round trips, so this holds), and the clocks of the clients that
// create counters do not lag behind each other by more than the time
// between the loss of a counter and the last grant before it. Tokens are
// below 2^53 until the year 2255, so they survive a trip through a
// float64.
//
// The counters never expire: memcached keeps one small item for every
// lock key ever used, as long as it runs.
//
// # Contexts, timeouts and Close
//
// gomemcache takes no context: each request is bounded by the client's
// Timeout (default 500ms) and nothing else. Every call of the driver runs
// its requests on a goroutine of its own and returns as soon as its
// context ends, with the context's error; the goroutine sends no further
// request, and the one it waits for ends within the client's Timeout,
// its result dropped. A request that was sent may still be applied: an
// abandoned acquire may leave a pending hold (gone within a second) or a
// grant (gone when it expires), which the front-end's cleanup Release
// removes. A Release waits first for the calls of its owner that were
// abandoned this way to end, so that it sees what they wrote. When a
// Release's context ends, or a request fails in a way a retry may cure,
// Release returns and keeps trying in the background, every 50ms, for
// the lease's TTL plus 3 seconds (5 seconds for a lease without a TTL):
// a release takes two requests, and losing the first one's reply would
// otherwise leave the hold until it expires.
//
// Set the client's Timeout well below the TTL (the default suits TTLs of
// 3 seconds and more), so that a renewal that gets no answer fails early
// enough to be retried, and MaxIdleConns to the number of calls you
// expect at once (default 2): beyond it, gomemcache dials a connection per
// request.
//
// The driver never closes the client: whoever created it owns it, and
// gomemcache's Client.Close only drops idle connections, leaving the
// client usable. [Driver.Close] ends the driver instead: calls under way
// and every later call return a permanent error wrapping [ErrClosed] at
// once, and Close waits for the requests under way (each bounded by the
// client's Timeout).
//
// # Shared mode
//
// The driver grants exclusive holds only; Mode Shared returns a permanent
// error wrapping errors.ErrUnsupported, and locker.RWMutex's read side
// with it. Readers that each expire on their own cannot share one item,
// which has one expiration time: a list of readers in one value, each
// with its expiry, would have to judge those expiries by the clocks of
// the clients, and a client whose clock runs ahead would drop a live
// reader and let a writer in. Doing it safely needs an item per reader,
// for memcached's clock to expire, plus the list in the hold kept
// consistent with them by compare-and-swap: three to five round trips per
// reader operation, and a writer that reads every reader's item before it
// may proceed. That is not implemented.
//
// # Internals: data layout
//
// Each lock key uses two items. With the default prefix "locker:", lock
// key "orders/42" uses:
//
//	locker:l:orders/42  the hold: "1 <token> <nonce> <end> <ttl> <owner>",
//	                    expiring TTL+2 seconds after each write
//	locker:f:orders/42  the fence counter: the last token taken, in
//	                    decimal, never expiring
//
// In the hold, token is the fencing token (0 while the grant is pending,
// see below), nonce names the acquire attempt that claimed the key, end is
// the Unix time in milliseconds at which the lease ends on the clock of
// the client that last wrote it, ttl the lease's TTL in seconds, and owner
// the owner string. There is no hold item while the key is free.
//
// # Internals: keys
//
// memcached keys are at most 250 bytes, without spaces or control
// characters; lock keys are up to 512 bytes of UTF-8. The item keys are
// the prefix, the kind ("l:" or "f:") and the lock key with every control
// character, space, DEL and '%' written as '%' and two hex digits. This is
// injective: the escaping can be undone, and the kinds are distinct
// strings of one length. When the result would exceed 250 bytes, the
// kinds are "l#" and "f#" and the body is the hex SHA-256 of the lock key
// (64 bytes), which leaves room for a prefix of up to 184 bytes.
//
// No encoding into 250 bytes can be injective on every key of 512 bytes:
// there are far more of the latter. Hashing is safe nonetheless, because
// two lock keys that shared their items would behave as one lock: each
// excludes the other's holders, and their tokens come from one counter,
// so each key's tokens still increase. A collision could only make two
// locks wait for each other, never let two holders in. And SHA-256 has no
// known collision: among n distinct long keys the chance of any is below
// n²/2²⁵⁷.
//
// # Internals: acquire
//
// TryAcquire claims the key with add, which memcached grants to one
// client only, writing a pending hold (token 0) with a fresh nonce that
// expires at memcached's next clock tick (within a second). It then takes
// a token with incr of the fence counter, reads the hold back with gets
// and, if it is still this attempt's pending hold, writes the token into
// it with cas, which also sets its expiration to TTL+2 seconds. That cas
// is the grant. Four round trips; a refused attempt takes two (add, gets)
// and returns a [driver.LockedError], and an attempt by the owner that
// holds the key takes three (add, gets, cas) and returns the same token
// with the lease extended.
//
// Tokens increase in the order of grants because the token is taken
// while the key is claimed: the nonce makes the pending hold this
// attempt's own, so the hold that the cas replaces is the one the add
// wrote, unchanged in between (cas fails if anyone wrote the item since the
// gets), and the incr happened between the two. Every earlier grant took
// its token before its hold ended, so before this add; every later one
// will take its token after this cas. A client that claims the key and
// stops before the cas leaves a pending hold that blocks the key for at
// most a second; a later attempt by the same owner takes such a claim
// over.
//
// # Internals: refresh and release
//
// Refresh reads the hold with gets, checks that it is the owner's granted
// hold (with the lease's token, when not 0), and writes it back with cas,
// extended. cas fails when the item changed since the gets, and when it
// no longer exists: a hold that expired or was released is never written
// again. Release does the same with a cas that stores an item already
// expired (expiration time -1), which deletes it; memcached's delete takes
// no CAS id, so it could remove a hold that someone else took between the
// check and the delete. Both are race-free for the same reason: the cas
// succeeds only on the very item version that the gets showed to be the
// owner's. A cas that fails because of another write (another call of
// the same owner) is retried from the gets, up to 8 times.
//
// # Internals: expiration
//
// memcached's clock counts whole seconds, advanced by a timer once a
// second, and an item stored with expiration time E expires when that
// clock has advanced by E; because the clock may be up to a second behind
// and its ticks may skip a second when the timer drifts across one, the
// item lives more than E-2 seconds (less the lateness of one tick of
// memcached's timer, which the front-end's safety margin covers) and at
// most about E+1. The driver writes holds with E = TTL+2, so a hold lives
// at least its TTL, counted from the request, and at most TTL+3 seconds
// after its last renewal. TTLs are whole seconds (Capabilities.TTLUnit; the
// driver never rounds), from MinTTL, 3 seconds, which keeps that overrun
// no longer than the TTL, to MaxTTL, 30 days less 2 seconds, beyond which
// memcached would read the expiration time as a Unix time.
//
// LockedError.Remaining is the time until the end recorded in the hold,
// on this client's clock, between 0 and the holder's TTL: a waiter polls
// again then, and with backoff for the few seconds the item may outlive
// it.
package memcachedriver
