package zkdriver_test

import (
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/internal/failovertest"
	"github.com/go-locker/locker/internal/zktest"
)

// TestEnsembleFailover kills the leader (SIGKILL) while two Clients with
// two goroutines each contend for one key (critical section 300 ms, TTL
// 5 s, session timeout = TTL), five times: no holds overlap, no fenced
// update is lost, and the key never goes without a grant after the kill
// for longer than the new leader's election time plus 2 s, nor than the
// TTL. SAFETY.md ("Failover") has the figures.
func TestEnsembleFailover(t *testing.T) {
	e := ensemble(t)
	const ttl = 5 * time.Second
	addrs := e.Addrs()
	errs := locker.WithErrorHandler(func(err error) { t.Logf("error handler: %v", err) })
	failovertest.Check(t, failovertest.Runs(5), 2*time.Second, true, func(run int) failovertest.Config {
		var clients []*locker.Client
		for range 2 {
			c := locker.New(connect(t, addrs, ttl, nil), errs)
			t.Cleanup(func() { _ = c.Close(ctxT(t)) })
			clients = append(clients, c)
		}
		var killed *zktest.Server
		return failovertest.Config{
			Clients: clients, Goroutines: 2, Key: uniqueKey(t, "failover"),
			TTL: ttl, Hold: 300 * time.Millisecond, Before: 2 * time.Second, After: 3 * time.Second,
			Kill: func() time.Time {
				l, err := e.Leader(10 * time.Second)
				if err != nil {
					t.Fatal(err)
				}
				killed = l
				at := time.Now()
				if err := l.Kill(); err != nil {
					t.Fatal(err)
				}
				t.Logf("run %d: killed leader %d", run, l.ID)
				return at
			},
			Elected: func() time.Time {
				if _, err := e.Leader(30 * time.Second); err != nil {
					t.Fatal(err)
				}
				return time.Now()
			},
			Restore: func() {
				if err := killed.Restart(); err != nil {
					t.Fatalf("restarting server %d: %v", killed.ID, err)
				}
				if err := e.WaitServing(60 * time.Second); err != nil {
					t.Fatal(err)
				}
			},
			Log: t.Logf,
		}
	})
}
