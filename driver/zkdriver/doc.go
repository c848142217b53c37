// Package zkdriver is a locker driver for Apache ZooKeeper 3.5.3 or later.
// Its locks are the recipe of Curator's InterProcessMutex and
// InterProcessReadWriteLock: ephemeral sequential nodes in a per-key
// queue, served in order, each waiter watching only the node it waits
// for. With a Curator layout (Options.Layout) they share keys with
// Curator's own locks; use it on every path a Curator client locks.
// Without it, a request that finds a Curator node in the queue fails with
// [ErrCuratorLayout], but a Curator client that arrives while this
// driver's node holds the key takes it too: Curator orders the nodes it
// did not name after its own, and nothing on the Go side can stop that.
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
// nodes, the queue, the requests, the session states and the limits.
//
// # Connections and sessions
//
// [Connect] connects and waits for the first session; the driver owns
// that connection ([Driver.Close] closes it, [Driver.Conn] returns it).
// To make the connection yourself:
//
//	sess := new(zkdriver.Session)
//	conn, _, err := zk.Connect(servers, 20*time.Second, zk.WithLogger(l), sess.ConnOption())
//	d, err := zkdriver.New(conn, sess, &zkdriver.Options{Root: "/myapp/locks"})
//	err = sess.Wait(ctx) // the first session
//
// The driver never closes a connection it did not make. It takes a
// [zk.Conn] of go-zookeeper (github.com/go-zookeeper/zk), whose options
// and ACLs it takes too. go-zookeeper tells the negotiated session timeout
// only to the code that made the connection: the [Session]'s ConnOption
// reads it; for a connection made without it (a discovery library's),
// set Options.SessionTimeout, and the driver learns of an expiry from a
// watch it keeps.
//
// A disconnection is not a loss: the session, and the holds with it, may
// survive it, and meanwhile the front-end's local deadline decides; a
// connection made by Connect (or with [ReconnectAtOnce]) tries again at
// once. An expired session loses every hold it kept, reported to
// WatchLoss as soon as the client learns of it; a node of the old session
// is never taken for a hold of the new one.
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
// A longer TTL is rejected with an error naming the limit. locker's
// default TTL is 15s: use a session timeout of at least that, within the
// servers' maxSessionTimeout (40s with ZooKeeper's default tickTime).
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
// # Contexts and closed connections
//
// Every call returns by its context's deadline whether or not ZooKeeper
// answers; a request outstanding then is left to finish, and a node it
// created is deleted in the background, as is the node of an Acquire
// that gave up. Once the driver is closed ([ErrClosed]) or its connection
// is (zk.Conn.Close was called), every call fails at once with an error
// that driver.IsPermanent reports, a waiting Acquire returns, and the
// holds of the session are reported lost. Refresh, RefreshBatch and
// Release refuse a lease another Driver granted (driver.ErrNotHeld) and
// leave it held.
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
// markers and both follow one queue. Every locker client of such a key
// must use the same layout.
//
// The layout is an option, not the default: nothing in a request tells a
// Mutex from an RWMutex's writer, which the two recipes name differently,
// and Curator's names cannot carry a semaphore's limit and weight (see
// [ErrCuratorLayout]). A Curator holder has no lease: it holds for as long
// as its session lives. docs/zkdriver.md says what Inspect and
// ForceRelease do with Curator's nodes and other libraries' nodes, which
// count as exclusive nodes of the queue.
package zkdriver
