package zkdriver

import "time"

// hotFor is how long a key counts as contended after it was last seen so:
// meanwhile TryAcquire lists the queue before it creates a node.
const hotFor = time.Second

// Bounds of the driver's lrus (see lru): the keys seen contended and the
// queue snapshots kept for Acquire, the first nodes of contended keys
// observed for expiry, and the key nodes known to exist.
const (
	maxHot       = 1024
	maxSnapshots = 1024
	maxObserved  = 4096
	maxParents   = 4096
)

// A snapshot is a key's queue as TryAcquire last saw it for an owner that
// it refused, kept for the Acquire that usually follows: if nothing but
// the owner's own changes happened to the queue since, which the key
// node's cversion after the Acquire's create tells, Acquire need not list
// the queue again.
type snapshot struct {
	q        queue
	cversion int32 // the key node's cversion when q was listed
	own      int32 // changes to the queue made by the owner since
	at       time.Time
}

// snapshot records q for the owner's next Acquire.
func (d *Driver) snapshot(nk nodeKey, q queue, cversion, own int32) {
	now := time.Now()
	d.mu.Lock()
	d.snaps.Put(nk, snapshot{q: q, cversion: cversion, own: own, at: now})
	d.mu.Unlock()
}

// snapshotFor is how long a snapshot is kept.
const snapshotFor = time.Second

// takeSnapshot returns the queue after the owner's create r if the
// owner's snapshot is recent and the queue changed since in known ways
// only: the owner's own changes, and deletions of gone nodes that are not
// known (from the key node's cversion and number of children, the
// deletions and creates by others follow). It returns nil when others
// created nodes meanwhile, or the snapshot is missing or old.
func (d *Driver) takeSnapshot(nk nodeKey, n *node, r createResult) (q queue, gone int) {
	d.mu.Lock()
	s, ok := d.snaps.Get(nk)
	d.snaps.Delete(nk)
	d.mu.Unlock()
	if !ok || time.Since(s.at) > snapshotFor {
		return nil, 0
	}
	// Changes by others: a creates and g deletes.
	extra := int(r.cversion - (s.cversion + s.own + 1))
	delta := int(r.numChildren) - (len(s.q) + 1)
	a, g := (extra+delta)/2, (extra-delta)/2
	if extra < 0 || (extra+delta)%2 != 0 || a != 0 || g < 0 || g > len(s.q) {
		return nil, 0
	}
	c := parseNode(n.path[len(n.parent)+1:])
	return append(s.q[:len(s.q):len(s.q)], c), g
}
