package redisdriver_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/internal/failovertest"
	"github.com/go-locker/locker/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// TestClusterContentionFailover kills the master of a contended key's
// slots in a Redis Cluster of three masters with one replica each, while
// two Clients with two goroutines each contend for the key (critical
// section 300 ms, TTL 5 s), on a fresh cluster per run (3, or
// LOCKER_FAILOVER_RUNS). It asserts that no fenced update is lost and that
// the key is granted again within the TTL of the kill, and reports the
// recovery against the replica's promotion. Overlapping holds are
// reported, not failed: without Options.Replicas a failover may lose a
// grant the replica had not received (TestClusterFailover shows it; see
// SAFETY.md), which is what fencing tokens are for.
func TestClusterContentionFailover(t *testing.T) {
	runs := failovertest.Runs(3)
	for run := range runs {
		t.Run(strconv.Itoa(run), func(t *testing.T) {
			cl := testserver.RedisClusterHA(t, 3)
			t.Cleanup(func() { waitGoroutinesGone(t, "internal/pool.(*ConnPool).tryDial", 5*time.Second) })
			victim, replica := cl.Masters[1], cl.Replicas[1]
			lo, hi := 16384/3, 2*16384/3-1 // Masters[1]'s slots
			var key string
			for i := 0; key == ""; i++ {
				k := uniqueKey(t, "k"+strconv.Itoa(i))
				s, err := testserver.Do(victim.Addr, "CLUSTER", "KEYSLOT", "locker:{"+k+"}:lock")
				if err != nil {
					t.Fatal(err)
				}
				if slot, _ := strconv.Atoi(s); slot >= lo && slot <= hi {
					key = k
				}
			}
			clients := failovertest.Clients(t, 2, func() driver.Driver {
				rc := newClusterClient(t, cl.Addrs()...)
				if err := rc.ForEachShard(ctxT(t), func(ctx context.Context, s *redis.Client) error { return s.Ping(ctx).Err() }); err != nil {
					t.Fatal(err)
				}
				return newDriver(t, rc)
			}, locker.WithErrorHandler(func(error) {}))
			cfg := failovertest.Scenario(clients, key)
			cfg.Kill = func() time.Time {
				at := time.Now()
				if err := victim.Kill(); err != nil {
					t.Fatal(err)
				}
				return at
			}
			cfg.Elected = func() time.Time {
				for start := time.Now(); time.Since(start) < 30*time.Second; time.Sleep(10 * time.Millisecond) {
					info, err := testserver.Do(replica.Addr, "INFO", "replication")
					if err == nil && strings.Contains(info, "role:master") {
						return time.Now()
					}
				}
				t.Fatal("the replica was not promoted within 30s")
				return time.Time{}
			}
			cfg.Log = t.Logf
			r := failovertest.Run(t, cfg)
			t.Logf("replica promoted %v after the kill, first grant after the kill %v, longest time without a grant after it %v, %d grants, %d lock deadlines, %d lost holds",
				r.Election.Round(time.Millisecond), r.FirstGrant.Round(time.Millisecond), r.MaxGap.Round(time.Millisecond), r.Grants, r.Deadlines, r.Lost)
			for _, err := range r.Violations {
				if strings.HasPrefix(err.Error(), "holds overlap") {
					t.Logf("without Replicas (asynchronous replication): %v", err)
				} else {
					t.Error(err)
				}
			}
			if r.FirstGrant < 0 || r.MaxGap > cfg.TTL {
				t.Errorf("%v without a grant after the kill (first grant %v); want at most the TTL %v", r.MaxGap, r.FirstGrant, cfg.TTL)
			}
		})
	}
}
