package natsdriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/natsdriver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/failovertest"
	"github.com/go-locker/locker/internal/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

// clusterBucket is the replicated bucket of the cluster tests.
const clusterBucket = "r3"

// clusterDriver returns a driver over a connection of its own to every
// server of c, on the bucket clusterBucket with three replicas.
func clusterDriver(t *testing.T, c *natstest.Cluster) *natsdriver.Driver {
	t.Helper()
	nc, err := connect(c.URLs())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	d, err := natsdriver.NewConn(ctxT(t), nc, &natsdriver.Options{Bucket: clusterBucket, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// streamLeader returns the name of the bucket's stream leader as a client
// of c sees it, "" while there is none.
func streamLeader(ctx context.Context, js jetstream.JetStream) string {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "KV_"+clusterBucket)
	if err != nil {
		return ""
	}
	info, err := s.Info(ctx)
	if err != nil || info.Cluster == nil {
		return ""
	}
	return info.Cluster.Leader
}

// TestClusterFailover kills (SIGKILL) the leader of the replicated
// bucket's stream in a 3-server cluster while two Clients with two
// goroutines each contend for one key (critical section 300 ms, TTL
// 10 s), five times: no hold is lost, no holds overlap, no fenced update
// is lost, and the key never goes without a grant after the kill for
// longer than the new leader's election time plus 2 s.
func TestClusterFailover(t *testing.T) {
	drivertest.Long(t, "starts a 3-server cluster")
	c := natstest.ClusterForTest(t, 3, natstest.Options{SyncAlways: true})
	js := jsOf(t, c.URLs())
	clusterDriver(t, c) // creates the bucket
	errs := locker.WithErrorHandler(func(err error) { t.Logf("error handler: %v", err) })
	results := failovertest.Check(t, failovertest.Runs(5), 2*time.Second, true, func(run int) failovertest.Config {
		clients := failovertest.Clients(t, 2, func() driver.Driver { return clusterDriver(t, c) }, errs)
		cfg := failovertest.Scenario(clients, uniqueKey(t))
		cfg.TTL = 10 * time.Second
		var killed *natstest.Server
		cfg.Kill = func() time.Time {
			killed = c.ByName(waitLeader(t, js, ""))
			at := time.Now()
			if err := killed.Kill(); err != nil {
				t.Fatal(err)
			}
			t.Logf("run %d: killed stream leader %s", run, killed.Name)
			return at
		}
		cfg.Elected = func() time.Time {
			waitLeader(t, js, killed.Name)
			return time.Now()
		}
		cfg.Restore = func() {
			if err := killed.Restart(); err != nil {
				t.Fatalf("restarting %s: %v", killed.Name, err)
			}
		}
		cfg.Log = t.Logf
		return cfg
	})
	for i, r := range results {
		if r.Lost != 0 {
			t.Errorf("run %d: %d holds lost; want none", i, r.Lost)
		}
	}
}

// waitLeader waits until the stream has a leader other than not, and
// returns its name.
func waitLeader(t *testing.T, js jetstream.JetStream, not string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if l := streamLeader(ctxT(t), js); l != "" && l != not {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatal("no stream leader within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
