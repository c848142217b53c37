package redisdriver_test

import (
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/internal/testserver"
)

// TestCluster runs the driver over a ClusterClient against a one-node
// Redis Cluster, which refuses scripts whose keys span hash slots
// (CROSSSLOT), so it checks that each lock's keys share one slot.
func TestCluster(t *testing.T) {
	parallelIfShort(t)
	srv := testserver.RedisCluster(t)
	d := newDriver(t, newClusterClient(t, srv.Addr))
	waiter := newDriver(t, newClusterClient(t, srv.Addr))
	ctx := ctxT(t)
	defer wantNoDispatcher(t)

	var ls []driver.Lease
	for _, k := range []string{"orders/42", "}x", "{", "a}b{c", "%7B", "ключ/🔒"} {
		k = uniqueKey(t, "") + k
		s := subscribe(t, waiter, k)
		l := mustAcquire(t, d, req(k, owner(), driver.Exclusive, time.Second))
		// Queued through waiter: the release hands the key over and
		// wakes the driver that queued the new holder.
		_, err := tryQueued(waiter, ctx, req(k, owner(), driver.Shared, time.Second))
		lockedRemaining(t, err)
		if _, err := d.Refresh(ctx, l); err != nil {
			t.Fatal(err)
		}
		if err := d.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
		wantWake(t, "release on a cluster", s)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		ls = append(ls, mustAcquire(t, d, req(k+"/r", owner(), driver.Shared, time.Second)))
	}
	for i, err := range d.RefreshBatch(ctx, ls) {
		if err != nil {
			t.Errorf("RefreshBatch[%d]: %v", i, err)
		}
	}
	for _, l := range ls {
		if err := d.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
}
