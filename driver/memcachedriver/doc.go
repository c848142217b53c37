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
// clock counts whole seconds). An acquire takes four round trips (a
// refused one two), a renewal and a release two each. The tests run
// against memcached 1.6.
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
// fewer than a million times per second on average, and the clocks of
// the clients that create counters do not lag behind each other by more
// than the time between the loss of a counter and the last grant before
// it. The counters never expire: memcached keeps one small item for every
// lock key ever used, as long as it runs.
//
// # Contexts, timeouts and Close
//
// gomemcache takes no context: each request is bounded by the client's
// Timeout (default 500ms) and nothing else. Every call of the driver
// returns as soon as its context ends, with the context's error; the
// request under way ends within the client's Timeout, and may still be
// applied: an abandoned acquire may leave a pending hold or a grant,
// which the driver takes back once the request returns, and the
// front-end's cleanup Release removes too. The driver
// does not retry a failed call: package locker does.
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
// and every later call return a permanent error wrapping
// [driver.ErrClosed] at
// once, and Close waits for the requests under way (each bounded by the
// client's Timeout).
//
// # Shared mode
//
// The driver grants exclusive holds only: locker.RWMutex's read side
// returns an error wrapping errors.ErrUnsupported on it. Readers that each expire on their own cannot share one item,
// which has one expiration time, and judging their expiries by the
// clients' clocks would let a client whose clock runs ahead drop a live
// reader and let a writer in.
//
// The items of a lock, the acquire protocol, refresh and release by
// compare-and-swap, and how expiration times are chosen are described in
// docs/memcachedriver.md at the repository's root.
package memcachedriver
