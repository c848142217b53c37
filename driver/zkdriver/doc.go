// Package zkdriver is a locker driver for Apache ZooKeeper. Its locks
// are the recipe of Curator's InterProcessMutex and
// InterProcessReadWriteLock: ephemeral sequential nodes in a per-key
// queue, served in order, each waiter watching only the node it waits
// for. With a Curator layout (Options.Layout) they share keys with
// Curator's own locks; see Apache Curator.
//
//	d, err := zkdriver.Connect(ctx, []string{"zk1:2181", "zk2:2181", "zk3:2181"}, 20*time.Second, nil)
//	if err != nil {
//		return err
//	}
//	defer d.Close()
//
//	c := locker.New(d) // one Client per process, shared by every handle
//	defer c.Close(ctx)
//	h, err := c.Mutex("orders/42").Acquire(ctx)
//
// Every lock type works on it: RWMutex, ReentrantMutex, Semaphore,
// Election and MultiLock. Waiters on every client are served in arrival
// order, in ZooKeeper's own queue, consecutive readers together and
// writers never starved; a release wakes one waiter, not the herd. A
// hold is lost at once when its session expires. Renewals due together go
// out in batches. Tokens are the ensemble's zxids: durable, increasing
// across leader changes and restarts. A TTL may not exceed the session
// timeout (see TTL and the session timeout).
//
// # Connections and sessions
//
// The driver must learn the session timeout the server negotiated (it
// bounds the TTL, see TTL and the session timeout) and the session's
// expiry. go-zookeeper tells neither to anyone but the code that made the
// connection, so a [Session] is hooked into the connection as it is made. [Connect] does it all and
// waits for the first session; it returns a driver that owns its
// connection ([Driver.Close] closes it; [Driver.Conn] returns it for other
// uses). To make the connection yourself:
//
//	sess := new(zkdriver.Session) // set sess.Dialer or sess.OnEvent to use your own
//	conn, _, err := zk.Connect(servers, 20*time.Second, sess.ConnOption(), zk.WithLogger(l))
//	d, err := zkdriver.New(conn, sess, &zkdriver.Options{Root: "/myapp/locks"})
//
// The driver never closes a connection it did not make. It starts no
// long-lived goroutine: for a call whose context can be cancelled, one
// carries the ZooKeeper request (go-zookeeper's calls take no context) and
// ends with it; one deletes a node left by a call whose context ended; when
// a session ends, one reports the loss of its holds.
//
// # The ZooKeeper client
//
// The driver takes a [zk.Conn] of package
// github.com/go-locker/locker/driver/zkdriver/zk, not of
// github.com/go-zookeeper/zk: that package is go-zookeeper v1.0.4, the
// newest release, with the same API and one fix, to a data race on a
// connection's last seen zxid between the goroutine that sets watches
// again after a reconnect and the one that reads replies (reproduced by
// TestReconnectWithWatches under -race; upstream has no release with a
// fix). Shipping the copy inside this module, rather than a replace
// directive (which applies only when this module is the main module, and
// which go install refuses) or upstream's package exempted from the race
// detector (which would also hide races between this driver and the
// client), means a program builds this driver against exactly the client
// its tests ran with under -race, with nothing to add to its go.mod; a
// program that already uses go-zookeeper switches that import line, or
// lets [Connect] make the connection. The package's README.md says what
// differs and when the copy goes away.
//
// # TTL and the session timeout
//
// TTLs range from MinTTL (1ms) to the session timeout that the server
// negotiated for the connection (Capabilities' MaxTTL; before the first
// session it is the timeout asked for). A hold must not outlive the session that
// keeps its node: the front-end declares a hold lost at send time + TTL −
// margin after its last confirmed renewal, and the server, which heard
// from the client no earlier than that send time, ends the session, and
// deletes the node, no earlier than one session timeout after it. With
// TTL ≤ session timeout the holder always learns of the loss first. A
// longer TTL is rejected with an error naming the limit (the front-end's
// ErrInvalidTTL); the acquire calls check it again against the session
// their node belongs to, since a new session may be negotiated
// differently. locker's default TTL is 15s: use a session timeout of at
// least that, within the servers' maxSessionTimeout (20 ticks, 40s with
// ZooKeeper's default tickTime).
//
// # Session states
//
// Disconnected: nothing happens. The session, and the holds with it, may
// survive a disconnection (the client reconnects to any server of the
// ensemble within the session timeout); whether it did cannot be proven
// meanwhile, and the front-end's local deadline decides: a hold whose
// renewals fail until its deadline is lost. A connection made by Connect
// (or with ReconnectAtOnce) tries again at once when a working connection
// breaks, instead of after go-zookeeper's pause of a second, so that a
// reset connection costs a hold no renewal of a short lease, and an
// expiry is learnt of at once. Expired: every hold of the
// session is lost at once; the loss is reported to the front-end as soon
// as the client learns of it (on reconnecting, or when a new session is
// established). go-zookeeper then opens a new session by itself: a node
// of the old one is never taken for a hold of the new one (every hold
// records its session), and a TryAcquire by the same owner makes a new
// node, with a new token.
//
// # Fencing tokens
//
// A hold's token is the czxid of its node: the zxid of the transaction that
// created it, which the ensemble assigns in a single total order (its high
// 32 bits are the leader's epoch, which grows with every election). So
// tokens strictly increase across all grants of all keys of one ensemble,
// across leader changes and restarts; a re-acquire or a refresh keeps the
// token. A resource that accepts a write only if its token is at least the
// highest it has seen (for that key) rejects writes of holders that lost
// their hold. Tokens from different ensembles are not comparable, and an
// ensemble rebuilt without its data starts over.
//
// # Access control
//
// Options.ACL applies to every node the driver creates. The default,
// zk.WorldACL(zk.PermAll), lets any client of the ensemble delete lock
// nodes; with a digest ACL (conn.AddAuth("digest", user:password) and
// zk.DigestACL(zk.PermAll, user, password)) other tenants can neither
// delete nor create lock nodes: their lock calls fail with a permanent
// error wrapping zk.ErrNoAuth. The ACL must grant the driver's own identity
// read, write, create and delete.
//
// # Contexts
//
// Every call checks its context before any request and between requests;
// a call whose context is done fails at once with its error, sending
// nothing. go-zookeeper's requests take no context: a request outstanding
// when the context ends is left to finish (its result, should it have
// created a node, is deleted). So every call returns by its context's
// deadline, whether or not ZooKeeper answers. A waiting Acquire returns as
// soon as its context ends; its node, like that of a TryAcquire refused
// as its context ended, is deleted in the background.
//
// # Closed connections
//
// Once the driver is closed (ErrClosed) or its connection is (zk.Conn.Close:
// the driver sees the close request go out, or a request fail with
// zk.ErrClosing), every call fails at once with an error that
// driver.IsPermanent reports, wrapping ErrClosed or zk.ErrClosing: a
// closed connection never answers again, so the front-end must not retry.
// A waiting Acquire returns, and the holds of the connection's session are
// reported lost to WatchLoss (closing the connection ends the session,
// which deletes its nodes). A connection closed while it was disconnected
// sends no close request: then calls fail at once with
// zk.ErrConnectionClosed, not marked permanent since a broken connection
// gives it too, unless a request under way at the close failed with
// zk.ErrClosing.
//
// # Apache Curator
//
// Java services on Apache Curator and Go services on locker can lock the
// same resources when the driver names its nodes as Curator's recipes do:
// Options.Layout LayoutCuratorMutex for keys that Curator locks with
// InterProcessMutex (or LeaderSelector, which takes one), and
// LayoutCuratorReadWrite for InterProcessReadWriteLock's. A key maps to
// the Curator path Root + "/" + the key's node name (see Internals:
// nodes): with the default root, key "orders" is Curator's path
// /locker/orders, and key "orders/42" is /locker/orders%2F42. A locker
// node is then "_c_<owner>-lock-<seq>", or "_c_<owner>-__WRIT__<seq>" and
// "_c_<owner>-__READ__<seq>": Curator finds its marker (lock-, __WRIT__,
// __READ__) in the name and orders the queue by the sequence number after
// it, as zkdriver does, so both follow one queue. Every locker client of
// such a key must use the same Curator layout: Curator sorts the default
// layout's nodes after all of its own and never waits for them.
//
// The layout is an option, not the default, for three reasons: the
// default layout's names are those that running deployments of this
// driver read (a rolling upgrade must not split a key's queue in two);
// InterProcessMutex and InterProcessReadWriteLock name an exclusive node
// differently (lock- and __WRIT__, each invisible to the other recipe),
// and nothing in a request tells a Mutex from an RWMutex's writer, so the
// driver must be told which recipe a key follows; and Curator's layout
// cannot carry a semaphore's limit and weight. In LayoutCuratorMutex
// Capabilities report no shared holds (InterProcessMutex has none), in
// both Curator layouts no counted ones, and such requests fail with a
// permanent error wrapping ErrCuratorLayout and errors.ErrUnsupported,
// leaving nothing held. Curator's InterProcessSemaphoreV2 counts leases in
// a second tree under a lock of its own, with no weights: a locker
// Semaphore cannot take part. Keys of both recipes can be served by two
// Drivers over one connection (New, with the same Session).
//
// A reentrant hold (ReentrantMutex) is one node however deep, as
// Curator's reentrant InterProcessMutex keeps one node per thread and
// counts re-entries in memory: each side sees the other's reentrant hold
// as one holder. An Election in LayoutCuratorMutex interoperates with
// Curator's LeaderSelector (an InterProcessMutex on the path), not with
// LeaderLatch, whose nodes carry the marker latch- and which the layouts
// cannot name, for the reason above.
//
// What each side sees of the other: Curator reads no node data, and lists
// locker's nodes among its participants (getParticipantNodes) with the
// locker owner, the front-end's hold id, in their names; zkdriver
// reads a Curator node's owner from its name (the UUID of its protected
// name) and reports it through Inspect as Holder.Owner, its data (the
// Curator client's IP address) as Holder.Value, its czxid as its Token,
// and no Remaining. A Curator holder never rewrites its node and has no
// lease: its node is held for as long as its session lives, and is
// never deleted for a TTL judged from its data. zkdriver's nodes keep
// their lease in their data; other locker clients judge them by it as in
// the default layout (see Internals: leases on ZooKeeper), while
// Curator's waiters wait for the node to be deleted: at release, when
// the locker holder's session ends, or when a locker waiter reclaims it
// after its lease ran out. Fencing tokens are the nodes' czxids
// on both sides (Curator exposes none, but a Java client can read its
// node's Stat). ForceRelease deletes Curator holders' nodes too; Curator
// does not notice that its hold is gone.
//
// Whatever the layout, a child of a key's node that zkdriver cannot parse
// (another library's, an unknown format) counts as an exclusive node of
// the queue, ordered by the sequence number at the end of its name (or
// before all others without one), held while it exists: it blocks, it
// is never dropped, and it is never deleted by a TTL. Inspect reports its
// name as its owner.
//
// # Leases of other drivers
//
// Refresh, RefreshBatch and Release refuse a lease that another Driver
// granted (another connection to the same ensemble) with
// driver.ErrNotHeld, and leave it held: a lease is refreshed and released
// only through the Driver that granted it. Nothing but that Driver writes
// a hold's node, so a hold whose lease ran out by its clock is over.
//
// # Limits
//
// ZooKeeper's sequence numbers are 32-bit: a key's node serves 2^31 lock
// nodes before they wrap and the order breaks (the key's container is
// deleted, and its counter starts over, whenever the key is idle long
// enough), a limit every ZooKeeper queue recipe shares.
//
// # Internals: nodes
//
// With the default root /locker, lock key "orders/42" uses:
//
//	/locker                                   persistent, created when missing
//	/locker/orders%2F42                       the key's node: a container
//	/locker/orders%2F42/_c_<owner>-w-0000000007   an exclusive hold or waiter
//	/locker/orders%2F42/_c_<owner>-r-0000000008   a shared one
//	/locker/orders%2F42/_c_<owner>.4.3-r-0000000009   a counted one: limit 4, weight 3
//
// and in the Curator layouts (see Apache Curator):
//
//	/locker/orders%2F42/_c_<owner>-lock-0000000007       LayoutCuratorMutex: exclusive
//	/locker/orders%2F42/_c_<owner>-__WRIT__0000000007    LayoutCuratorReadWrite: exclusive
//	/locker/orders%2F42/_c_<owner>-__READ__0000000008    LayoutCuratorReadWrite: shared
//
// The key's node name is the key with every byte outside ASCII letters,
// digits and -._~!$&'()*+,;=:@ written %XX, a leading '.' written %2E and
// the name "zookeeper" written %7Aookeeper: one path segment that
// ZooKeeper accepts, never "." or "..", never reserved, and a different one
// for every key (the mapping is injective; a fuzz test checks both). ZooKeeper
// deletes a container node once it is empty again (every minute by
// default), so idle keys leave nothing behind; on servers older than
// 3.5.3, which lack containers, the key's node is persistent.
//
// A lock node is ephemeral (it lives as long as the session that created
// it) and sequential; its name starts with "_c_" and the owner, the
// front-end's 128-bit random hold id, like Curator's protected nodes, and
// names its mode: w for exclusive, r for shared. A counted shared node (a
// semaphore's, see Internals: semaphores) carries the key's limit and its own weight in its
// name, after the owner and a dot each, so that one listing of the queue
// tells every node's place, mode, limit and weight; owners never contain a
// dot, and a parser that reads the owner up to the first '-' still sees
// a shared node. A node's data is the lease length in decimal
// milliseconds, followed, when the request had a Value, by a newline and
// the value's bytes (driver.MaxValueLen at most). Every rewrite of the
// node (refresh, re-acquire, a waiter's keep-alive) writes the same value
// again: a hold keeps the value it was granted with, and the value goes
// with the node. Inspect reports it as Holder.Value, with each holder's
// Weight and the key's Limit.
//
// # Internals: queue and fairness
//
// A node is granted when nothing before it in its key's queue blocks it:
// every node blocks an exclusive node, exclusive nodes block a shared one
// (for counted ones, see Internals: semaphores).
// So holds are served in arrival order (sequence number), consecutive
// readers together, and a reader that arrives after a waiting writer waits
// for it: writers are never starved.
//
// TryAcquire creates the owner's node and keeps it if it is granted;
// otherwise it deletes it again and returns a *driver.LockedError.
// Acquire creates the node and waits: an exclusive node watches the node
// just before it, a shared node the closest exclusive node before it, so
// that a release wakes one waiter (all readers behind a writer wake
// together), never the whole queue. A waiter also watches the blocking
// node before the one it waits for, and lists the queue again when that
// one goes: by the time its predecessor is released it knows whether that
// was the last node in its way, and it takes the lock on the deletion
// event without another round trip. Each node thus has at most two
// watchers among exclusive waiters.
//
// # Internals: semaphores
//
// A Shared request with a Limit (a semaphore's) takes Weight units of its
// key's Limit, in the same queue. A counted node is granted when every
// node before it, holder or waiter, is a shared node of the same limit and
// their weights plus its own add up to at most the limit. A waiter is thus
// never overtaken: a newcomer of weight 1 waits behind a waiter of weight
// 3 even where it alone would fit, by TryAcquire (refused) as by Acquire
// (queued), and the holds are the run of nodes at the head of the queue
// whose weights fit. TryAcquire costs what it costs for other modes (one
// round trip on a free key); an idempotent re-acquire keeps the node, its
// token and its weight.
//
// Every shared node before a request must have the request's limit (an
// uncounted shared node has limit 0): if one does not, the request is
// refused with an error wrapping a *driver.LimitError naming that node's
// limit, and its node, if it made one, is deleted; it is never granted.
// Exclusive nodes have no limit: they exclude counted ones, and the
// reverse, as they exclude other shared ones. Since the first node of two
// with different limits is in every later node's listing, two nodes of
// different limits are never both granted; two such requests that arrive
// together may both be refused.
//
// A counted waiter cannot tell which holder will go first, as holds are
// released in any order: the waiter at the head of the waiters (every node
// before it granted) watches the key's children and lists the queue again
// when they change, and times the first node's lease; each waiter behind
// it watches only the node just before it, which, once granted, rewrites
// its node if nodes follow it (one round trip), so that the waiter behind
// looks at the queue again. A release thus wakes the head waiter only,
// and a grant the waiter just behind it.
//
// # Internals: leases on ZooKeeper
//
// A ZooKeeper lock lives as long as its session. locker's leases must also
// end when their TTL passes without a renewal, even if the session lives
// on (a holder whose renewals stopped, a process stopped for longer than
// the TTL but shorter than the session timeout). The driver enforces both:
// a lock node's lease runs while its session lives and for its TTL from
// its last write. Refresh rewrites the node (one round trip), and waiting
// nodes rewrite themselves every third of their TTL so that the queue
// behind them does not take them for dead.
//
// Expiry by TTL is judged by the other clients, each on its own monotonic
// clock: a client that sees a node in the same version (mzxid) for the
// node's whole TTL, counted from the moment it first saw that version,
// deletes it, naming the version, so that a refresh on its way wins. The
// holder's own deadline runs from the send time of the write that made
// that version, which precedes the moment anyone saw it: the holder
// declares the hold lost before anyone can take it, whatever the clocks
// read, as long as they run at about the same rate (the front-end's safety
// margin, a tenth of the TTL, absorbs the difference). Nodes whose owner
// vanished without its session ending (a create whose outcome was never
// known, a crashed front-end) are reclaimed this way too. An Acquire
// reclaims the node it waits for; a TryAcquire reclaims the first node of
// the queue over repeated calls.
//
// A lease Acquire grants carries Lease.Start, the send time of the
// node's last write, when that write was within the last half of its TTL,
// which a waiting node's always is: the others' clocks have not started
// the lease before, and the front-end counts it from then on without a
// confirming Refresh.
//
// # Internals: ambiguous creates
//
// A create whose reply is lost (a connection dropped, a context done) may
// or may not have been applied. The driver remembers the owner, and the
// front-end's retry (same owner) finds the node by its name: it is kept,
// with its token, if it is a hold of the current session; the front-end's
// cleanup (Release with the owner) deletes it. A node whose create was
// abandoned by its context is deleted when the reply comes. Should all of
// this fail, the node is reclaimed by TTL like any lease that is not
// renewed: no ghost survives its TTL.
//
// # Internals: round trips
//
// An uncontended TryAcquire is one round trip: a multi request that
// creates the node and writes the key's node, whose returned stat gives
// the transaction's zxid (the token) and the number of nodes in the queue
// (1: granted). Release is one (delete), so is Refresh (set data) and a
// re-acquire by the holder; an uncontended Mutex Lock+Unlock takes two.
// RefreshBatch takes one multi request per 500 leases. The first acquire
// of a key that the driver has not seen lately (it remembers the last 4096
// key nodes it found) creates the key's node before the lock node: one
// more round trip, and for a new key the only one more, so that a new
// key's Lock+Unlock takes three. (A key whose node exists after all costs
// that round trip too, a create refused; a known key whose node ZooKeeper
// deleted meanwhile costs two: the refused multi, then the key node's
// create.) While a key is contended, TryAcquire
// lists the queue first (one round trip) and creates no node if it would
// have to wait; Acquire then creates its node (one), lists the queue
// unless nothing but its own create and releases ahead of it changed it
// since TryAcquire's listing (one), reads the two nodes it watches (two),
// and lists the queue once more when the farther one goes (one). The
// handoff itself, from the holder's delete to the next holder's Lock
// returning, takes no round trip (for a counted waiter, one listing: see
// below). BENCHMARKS.md (at the repository's root)
// has the measured counts and timings, side by side with go-zookeeper's
// zk.Lock.
package zkdriver
