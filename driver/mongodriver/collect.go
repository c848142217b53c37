package mongodriver

import (
	"context"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// maxPending bounds the keys whose old versions wait for deletion; beyond
// it a key's old versions are left to its next change. collectTimeout
// bounds one deletion.
const (
	maxPending     = 4096
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
// the driver is closed.
func (d *Driver) collectAll() {
	defer d.calls.Done()
	c := &d.gc
	for {
		c.mu.Lock()
		var key string
		var v int64
		for key, v = range c.pending {
			break
		}
		if v == 0 || d.life.Err() != nil {
			clear(c.pending)
			c.running = false
			c.mu.Unlock()
			return
		}
		delete(c.pending, key)
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(d.life, collectTimeout)
		_, _ = d.coll.DeleteMany(ctx, bson.D{{Key: "k", Value: key}, {Key: "v", Value: bson.D{{Key: "$lt", Value: v}}}})
		cancel()
	}
}
