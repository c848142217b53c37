package zkdriver

import (
	"context"
	"errors"
	"time"

	"github.com/go-zookeeper/zk"
)

// observation is a node of another owner watched for expiry by TryAcquire.
type observation struct {
	path  string
	mzxid int64         // 0: seen in a listing, not read yet
	seen  time.Time     // when this version was first seen
	ttl   time.Duration // from its data; 0 until read
}

// reclaim deletes c, the first node of the queue under parent, if its
// version has not changed for its whole TTL since this client first saw
// it (docs/zkdriver.md, leases); the delete names the version. A node
// first seen in a listing is only noted, and read once that is due.
func (d *Driver) reclaim(ctx context.Context, parent string, c child) (gone bool, remaining time.Duration, err error) {
	if c.foreign {
		return false, 0, nil // held while its session lives
	}
	path := parent + "/" + c.name
	now := time.Now()
	d.mu.Lock()
	o, ok := d.obs.Get(parent)
	d.mu.Unlock()
	if !ok || o.path != path {
		d.observe(parent, observation{path: path, seen: now})
		return false, 0, nil
	}
	if o.mzxid != 0 && now.Sub(o.seen) < o.ttl {
		return false, o.ttl - now.Sub(o.seen), nil
	}
	if o.mzxid == 0 && now.Sub(o.seen) < pollGap {
		return false, 0, nil
	}
	data, st, err := d.get(ctx, path)
	recv := time.Now()
	if errors.Is(err, zk.ErrNoNode) {
		d.unobserve(parent, path)
		return true, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	ttl, ok := decodeTTL(data)
	if !ok {
		return false, 0, nil // not ours to judge
	}
	if o.mzxid != st.Mzxid {
		d.observe(parent, observation{path: path, mzxid: st.Mzxid, seen: recv, ttl: ttl})
		return false, ttl, nil
	}
	// Unchanged for o.ttl since o.seen: expired.
	err = d.del(ctx, path, st.Version)
	switch {
	case err == nil, errors.Is(err, zk.ErrNoNode):
		d.unobserve(parent, path)
		return true, 0, nil
	case errors.Is(err, zk.ErrBadVersion):
		d.observe(parent, observation{path: path, seen: time.Now()})
		return false, 0, nil
	}
	return false, 0, err
}

// pollGap is how soon after noting a node TryAcquire reads it.
const pollGap = 5 * time.Millisecond

// observe records o, the first node of the queue under parent.
func (d *Driver) observe(parent string, o observation) {
	d.mu.Lock()
	d.obs.Put(parent, o)
	d.mu.Unlock()
}

// unobserve forgets the node at path, the first of the queue under parent.
func (d *Driver) unobserve(parent, path string) {
	d.mu.Lock()
	if o, ok := d.obs.Get(parent); ok && o.path == path {
		d.obs.Delete(parent)
	}
	d.mu.Unlock()
}
