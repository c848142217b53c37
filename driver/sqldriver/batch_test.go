package sqldriver_test

import (
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
)

// TestRefreshBatchConcurrent runs batch refreshes of many leases on several
// clients while others acquire and release other keys: every lease is
// extended every time, without the deadlocks that locking more rows than
// the batch's own would cause.
func TestRefreshBatchConcurrent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const clients, leases, rounds = 4, 50, 10
		var wg sync.WaitGroup
		for c := range clients {
			d := b.driver(t, nil)
			ls := make([]driver.Lease, leases)
			for i := range ls {
				ls[i] = mustAcquire(t, d, req(uniqueKey(t, "held"), driver.Exclusive, time.Minute))
			}
			churn := b.driver(t, nil)
			wg.Go(func() {
				ctx := ctxT(t)
				for r := range rounds {
					for i, err := range d.(driver.BatchRefresher).RefreshBatch(ctx, ls) {
						if err != nil {
							t.Errorf("client %d round %d: RefreshBatch lease %d: %v", c, r, i, err)
						}
					}
				}
			})
			wg.Go(func() {
				ctx := ctxT(t)
				for range rounds * 5 {
					l, err := churn.TryAcquire(ctx, req(uniqueKey(t, "churn"), driver.Shared, time.Minute))
					if err == nil {
						err = churn.Release(ctx, l)
					}
					if err != nil {
						t.Errorf("churn: %v", err)
					}
				}
			})
		}
		wg.Wait()
	})
}
