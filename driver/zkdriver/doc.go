// Package zkdriver is a locker driver for Apache ZooKeeper. Its locks
// are the recipe of Curator's InterProcessMutex and
// InterProcessReadWriteLock: ephemeral sequential nodes in a per-key
// queue, served in order, each waiter watching only the node it waits
// for. With a Curator layout (Options.Layout) they share keys with
// Curator's own locks.
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
// order in ZooKeeper's own queue, consecutive readers together and
// writers never starved; a release wakes one waiter, not the herd. A hold
// is lost at once when its session expires. Renewals due together go out
// in batches. docs/zkdriver.md (at the repository's root) describes the
// nodes, the queue and the requests in detail.
//
// # Connections and sessions
//
// The driver must learn the session timeout the server negotiated (it
// bounds the TTL) and the session's expiry, which go-zookeeper tells only
// the code that made the connection; so a [Session] is hooked into the
// connection as it is made. [Connect] does it all and waits for the first
// session; the driver owns that connection ([Driver.Close] closes it,
// [Driver.Conn] returns it). To make the connection yourself:
//
//	sess := new(zkdriver.Session) // set sess.OnEvent to use your own event callback
//	conn, _, err := zk.Connect(servers, 20*time.Second, sess.ConnOption(), zk.WithLogger(l))
//	d, err := zkdriver.New(conn, sess, &zkdriver.Options{Root: "/myapp/locks"})
//
// The driver never closes a connection it did not make, and starts no
// long-lived goroutine.
//
// # The ZooKeeper client
//
// The driver takes a [zk.Conn] of package
// github.com/go-locker/locker/driver/zkdriver/zk: go-zookeeper v1.0.4, the
// newest release, with the same API and one data race fixed (reproduced
// by TestReconnectWithWatches under -race). Shipping it inside this module
// means a program builds against exactly the client the tests ran with,
// with nothing to add to its go.mod; a program that already uses
// go-zookeeper switches that import line, or lets [Connect] make the
// connection. The package's README.md says what differs and when the copy
// goes away.
//
// # TTL and the session timeout
//
// TTLs range from [MinTTL] to the session timeout negotiated for the
// connection (Capabilities' MaxTTL; before the first session, the timeout
// asked for). A hold must not outlive the session that keeps its node:
// the front-end declares a hold lost at send time + TTL − margin after its
// last renewal, and the server ends the session, deleting the node, no
// earlier than one session timeout after it last heard from the client.
// With TTL ≤ session timeout the holder always learns of the loss first.
// A longer TTL is rejected with an error naming the limit, checked again
// against the session a node belongs to. locker's default TTL is 15s: use
// a session timeout of at least that, within the servers'
// maxSessionTimeout (40s with ZooKeeper's default tickTime).
//
// # Session states
//
// Disconnected: nothing happens. The session, and the holds with it, may
// survive a disconnection (the client reconnects to any server within the
// session timeout); meanwhile the front-end's local deadline decides. A
// connection made by Connect (or with [ReconnectAtOnce]) tries again at
// once when a working connection breaks. When the connection has a
// session again, waiters list their queue and watch anew. Expired: every
// hold of the session is lost at once, reported to WatchLoss as soon as
// the client learns of it. go-zookeeper then opens a new session by
// itself; a node of the old session is never taken for a hold of the new
// one, and a TryAcquire by the same owner makes a new node, with a new
// token.
//
// # Fencing tokens
//
// A hold's token is the czxid of its node: the zxid of the transaction
// that created it, which the ensemble assigns in one total order whose
// high 32 bits are the leader's epoch. So tokens strictly increase across
// all grants of all keys of one ensemble, across leader changes and
// restarts; a re-acquire or a refresh keeps the token. Tokens from
// different ensembles are not comparable, and an ensemble rebuilt without
// its data starts over.
//
// # Access control
//
// Options.ACL applies to every node the driver creates. The default,
// zk.WorldACL(zk.PermAll), lets any client of the ensemble delete lock
// nodes; with a digest ACL other tenants can neither delete nor create
// them: their lock calls fail with a permanent error wrapping
// zk.ErrNoAuth. The ACL must grant the driver's own identity read, write,
// create and delete.
//
// # Contexts and closed connections
//
// Every call checks its context before and between requests, and returns
// by the context's deadline whether or not ZooKeeper answers:
// go-zookeeper's requests take no context, so a request outstanding when
// the context ends is left to finish, and a node it created is deleted in
// the background, as is the node of an Acquire that gave up.
//
// Once the driver is closed ([ErrClosed]) or its connection is
// (zk.Conn.Close was called), every call fails at once with an error that
// driver.IsPermanent reports, a waiting Acquire returns, and the holds of
// the session are reported lost.
//
// # Apache Curator
//
// Java services on Apache Curator and Go services on locker can lock the
// same resources: Options.Layout [LayoutCuratorMutex] for keys that
// Curator locks with InterProcessMutex (or LeaderSelector), and
// [LayoutCuratorReadWrite] for InterProcessReadWriteLock's. A key maps to
// the Curator path Root + "/" + the key's node name: with the default
// root, key "orders" is /locker/orders and "orders/42" is
// /locker/orders%2F42. Locker's nodes are then named with Curator's
// markers (lock-, __WRIT__, __READ__) and both follow one queue. Every
// locker client of such a key must use the same layout.
//
// The layout is an option, not the default: running deployments read the
// default names; nothing in a request tells a Mutex from an RWMutex's
// writer, which the two recipes name differently; and Curator's names
// cannot carry a semaphore's limit and weight. So in LayoutCuratorMutex
// Capabilities report no shared holds, in both Curator layouts no counted
// ones, and such requests fail with a permanent error wrapping
// [ErrCuratorLayout] and errors.ErrUnsupported, leaving nothing held. A
// reentrant hold is one node however deep, as in Curator; an Election in
// LayoutCuratorMutex interoperates with LeaderSelector, not LeaderLatch.
//
// Inspect reports a Curator holder's owner (the UUID in its name), its
// data (the client's IP address) as Value, its czxid as Token, and no
// Remaining. A Curator holder has no lease: its node is held for as long
// as its session lives and is never deleted for a TTL. ForceRelease
// deletes Curator holders' nodes too; Curator does not notice.
//
// Whatever the layout, a child of a key's node that zkdriver cannot parse
// (another library's) counts as an exclusive node of the queue, ordered by
// the sequence number at the end of its name (or before all others
// without one): it blocks, and it is never dropped nor deleted by a TTL.
// Inspect reports its name as its owner.
//
// # Leases of other drivers
//
// Refresh, RefreshBatch and Release refuse a lease that another Driver
// granted with driver.ErrNotHeld and leave it held: a lease is refreshed
// and released only through the Driver that granted it. Nothing else
// writes a hold's node, so a hold whose lease ran out by this driver's
// clock is over (its node is deleted).
//
// # Limits
//
// ZooKeeper's sequence numbers are 32-bit: a key's node serves 2^31 lock
// nodes before they wrap and the order breaks (the key's container is
// deleted, and its counter starts over, whenever the key is idle long
// enough), a limit every ZooKeeper queue recipe shares.
package zkdriver
