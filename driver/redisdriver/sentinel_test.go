package redisdriver_test

import (
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// TestSentinel runs the driver over a Sentinel failover client, through a
// failover: after the master dies and the replica is promoted, the driver
// and its subscriptions work against the new master.
func TestSentinel(t *testing.T) {
	drivertest.Long(t, "failover takes seconds")
	master, replica, sentinel, newFailover := sentinelSetup(t)
	d := newDriver(t, newFailover())
	waiter := newDriver(t, newFailover())
	ctx := ctxT(t)
	defer wantNoDispatcher(t)

	k := uniqueKey(t, "k")
	s := subscribe(t, waiter, k)
	defer s.Close()
	l := mustAcquireContended(t, d, k)
	if err := d.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	wantWake(t, "release", s)
	l = mustAcquire(t, d, req(k, owner(), driver.Shared, 30*time.Second))

	// Wait until the replica has the hold, then fail over.
	admin := newClient(t, replica.Addr)
	deadline := time.Now().Add(10 * time.Second)
	for admin.Exists(ctx, "locker:{"+k+"}:readers").Val() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("replica did not get the hold")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := testserver.WaitSentinelReplicas(sentinel, 1, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := master.Kill(); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for !isMaster(t, admin) {
		if time.Now().After(deadline) {
			t.Fatal("no failover")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The subscription was told that it may have missed releases.
	wantWake(t, "failover", s)

	// The hold survived (it had been replicated) and the driver works
	// against the new master, retrying until the client has switched.
	eventually(t, "Refresh after failover", 30*time.Second, func() error {
		_, err := d.Refresh(ctxT(t), l)
		return err
	})
	// Drain wakes caused by the failover, then check that releases are
	// delivered on the new master.
	waitNumSub(t, admin, k, 1)
	time.Sleep(50 * time.Millisecond)
	select {
	case <-s.C():
	default:
	}
	if err := d.Release(ctxT(t), l); err != nil {
		t.Fatal(err)
	}
	wantWake(t, "release after failover", s)
	l2 := mustAcquire(t, d, req(k, owner(), driver.Exclusive, time.Second))
	if l2.Token <= l.Token {
		t.Fatalf("token after failover %d, want > %d", l2.Token, l.Token)
	}
}

// isMaster reports whether c's server reports the role of a master.
func isMaster(t *testing.T, c redis.UniversalClient) bool {
	role, err := c.Do(ctxT(t), "ROLE").Slice()
	return err == nil && len(role) > 0 && role[0] == "master"
}

// sentinelSetup starts a master, its replica and a Sentinel that monitors
// the master, and returns them with a function that makes failover
// clients through the Sentinel, closed at t's cleanup.
func sentinelSetup(t *testing.T) (master, replica, sentinel *testserver.Server, newFailover func() redis.UniversalClient) {
	t.Helper()
	master = privateServer(t)
	replica = testserver.Replica(t, master)
	sentinel = testserver.Sentinel(t, master)
	return master, replica, sentinel, func() redis.UniversalClient {
		c := redis.NewUniversalClient(&redis.UniversalOptions{
			MasterName:            testserver.SentinelMaster,
			Addrs:                 []string{sentinel.Addr},
			ContextTimeoutEnabled: true,
		})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
}
