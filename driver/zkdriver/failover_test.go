package zkdriver_test

import (
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/internal/failovertest"
	"github.com/go-locker/locker/internal/zktest"
)

// TestEnsembleFailover kills the leader (SIGKILL) while two Clients with
// two goroutines each contend for one key (critical section 300 ms, TTL
// 5 s, session timeout = TTL), five times: no holds overlap, no fenced
// update is lost, and the key never goes without a grant after the kill
// for longer than the new leader's election time plus 2 s, nor than the
// TTL.
func TestEnsembleFailover(t *testing.T) {
	e := ensemble(t)
	addrs := e.Addrs()
	errs := locker.WithErrorHandler(func(err error) { t.Logf("error handler: %v", err) })
	failovertest.Check(t, failovertest.Runs(5), 2*time.Second, true, func(run int) failovertest.Config {
		cfg := failovertest.Scenario(nil, uniqueKey(t, "failover"))
		// The session timeout is the TTL.
		cfg.Clients = failovertest.Clients(t, 2, func() driver.Driver { return connect(t, addrs, cfg.TTL, nil) }, errs)
		var killed *zktest.Server
		cfg.Kill = func() time.Time {
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
		}
		cfg.Elected = func() time.Time {
			if _, err := e.Leader(30 * time.Second); err != nil {
				t.Fatal(err)
			}
			return time.Now()
		}
		cfg.Restore = func() {
			if err := killed.Restart(); err != nil {
				t.Fatalf("restarting server %d: %v", killed.ID, err)
			}
			if err := e.WaitServing(60 * time.Second); err != nil {
				t.Fatal(err)
			}
		}
		cfg.Log = t.Logf
		return cfg
	})
}
