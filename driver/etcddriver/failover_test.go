package etcddriver_test

import (
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/etcdtest"
	"github.com/go-locker/locker/internal/failovertest"
)

// TestClusterFailover stops the leader of a 3-member cluster hard (as a
// crash would) while two Clients with two goroutines each contend for one
// key (critical section 300 ms, TTL 5 s), five times: no holds overlap, no
// fenced update is lost, and the key never goes without a grant after the
// kill for longer than the new leader's election time plus 2 s, nor than
// the TTL. SAFETY.md has the figures.
func TestClusterFailover(t *testing.T) {
	drivertest.Long(t, "starts a 3-member cluster")
	c := etcdtest.StartCluster(t, 3)
	if err := waitReady(ctxT(t), clusterClient(t, c)); err != nil {
		t.Fatal(err)
	}
	errs := locker.WithErrorHandler(func(err error) { t.Logf("error handler: %v", err) })
	failovertest.Check(t, failovertest.Runs(5), 2*time.Second, true, func(run int) failovertest.Config {
		clients := failovertest.Clients(t, 2, func() driver.Driver { return newDriverOn(t, clusterClient(t, c), nil) }, errs)
		cfg := failovertest.Scenario(clients, uniqueKey(t, "failover"))
		var killed *etcdtest.Member
		var halted chan struct{}
		cfg.Kill = func() time.Time {
			l, err := c.Leader(10 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			killed = c.Members[l]
			at := time.Now()
			// Kill stops the member's Raft node at once, then waits
			// about a second for the server to close: the election runs
			// meanwhile.
			halted = make(chan struct{})
			go func() {
				defer close(halted)
				killed.Kill()
			}()
			t.Logf("run %d: killing leader %s", run, killed.Name)
			return at
		}
		cfg.Elected = func() time.Time {
			for {
				l, err := c.Leader(30 * time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if c.Members[l] != killed {
					return time.Now()
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		cfg.Restore = func() {
			<-halted
			if err := killed.Restart(); err != nil {
				t.Fatalf("restarting %s: %v", killed.Name, err)
			}
			if err := waitReady(ctxT(t), clusterClient(t, c)); err != nil {
				t.Fatal(err)
			}
		}
		cfg.Log = t.Logf
		return cfg
	})
}
