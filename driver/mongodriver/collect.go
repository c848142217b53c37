package mongodriver

import (
	"context"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// maxPending bounds the keys whose old versions wait for deletion; beyond
// it a key's old versions are left to its next change. collectBatch keys
// are deleted by one request, which collectTimeout bounds.
const (
	maxPending     = 4096
	collectBatch   = 64
	collectTimeout = 10 * time.Second
)

// A collector deletes, one key at a time on one goroutine of the
// driver's, the versions below a key's latest insert. A version below one
// that exists is never read as current again, so deleting it cannot
// change a decision; an insert that reuses a deleted number (by a writer
// whose read is older than the deletion) is below the current version
// too, and its writer's check fails (see the package documentation). A
// deletion that fails is left to the key's next change.
type collector struct {
	mu      sync.Mutex
	pending map[string]int64 // key → delete the versions below this
	running bool
}

// collect has the versions of key below v deleted. It is called during a
// call of the driver, so that Close waits for the goroutine it may start.
func (d *Driver) collect(key string, v int64) {
	c := &d.gc
	c.mu.Lock()
	if c.pending == nil {
		c.pending = make(map[string]int64)
	}
	if _, ok := c.pending[key]; ok || len(c.pending) < maxPending {
		c.pending[key] = max(c.pending[key], v)
	}
	start := !c.running
	c.running = true
	c.mu.Unlock()
	if start {
		d.calls.Add(1)
		go d.collectAll()
	}
}

// collectAll deletes what collect asked for until nothing is pending or
// the driver is closed: one deleteMany for up to collectBatch keys, so
// that the deletions cost one write however many keys changed meanwhile.
func (d *Driver) collectAll() {
	defer d.calls.Done()
	for {
		batch := d.gc.take(collectBatch, d.life.Err() != nil)
		if len(batch) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(d.life, collectTimeout)
		_, _ = d.coll.DeleteMany(ctx, bson.D{{Key: "$or", Value: batch}})
		cancel()
	}
}

// take removes up to n pending keys and returns the filters that delete
// their old versions; none, and the collector stops, when nothing is
// pending or the driver is closed.
func (c *collector) take(n int, closed bool) bson.A {
	c.mu.Lock()
	defer c.mu.Unlock()
	var batch bson.A
	for key, v := range c.pending {
		if closed || len(batch) == n {
			break
		}
		batch = append(batch, bson.D{{Key: "k", Value: key}, {Key: "v", Value: bson.D{{Key: "$lt", Value: v}}}})
		delete(c.pending, key)
	}
	if len(batch) == 0 {
		clear(c.pending)
		c.running = false
	}
	return batch
}
