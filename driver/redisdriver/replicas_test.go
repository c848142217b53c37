package redisdriver_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/testserver"
	"github.com/redis/go-redis/v9"
)

func ackedDriver(t *testing.T, c redis.UniversalClient, replicas int, timeout time.Duration) *redisdriver.Driver {
	t.Helper()
	d, err := redisdriver.New(c, &redisdriver.Options{Replicas: replicas, ReplicaTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	made.Add(t, d, c, nil)
	return d
}

func wantNotReplicated(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, redisdriver.ErrNotReplicated) || driver.IsPermanent(err) {
		t.Fatalf("%s: %v, want a transient error wrapping ErrNotReplicated", what, err)
	}
}

// TestReplicaAcks: with Options.Replicas, grants and renewals that the
// replicas acknowledge succeed in one round trip each; without enough
// replicas (none attached, or the replica paused), a grant fails with a
// transient ErrNotReplicated and leaves the key free, and a renewal fails
// likewise and keeps the hold.
func TestReplicaAcks(t *testing.T) {
	if _, err := redisdriver.New(redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:1", "127.0.0.1:2"}}), nil); err != nil {
		t.Fatal(err)
	}
	master := privateServer(t)
	c := newClient(t, master.Addr)
	ctx := ctxT(t)
	k := uniqueKey(t, "k")

	// No replica: nothing acknowledges. (quick waits for the failures, a
	// generous one for the successes)
	quick := ackedDriver(t, c, 1, 50*time.Millisecond)
	d := ackedDriver(t, c, 1, 5*time.Second)
	_, err := quick.TryAcquire(ctx, req(k, owner(), driver.Exclusive, time.Minute))
	wantNotReplicated(t, "TryAcquire without replicas", err)
	if n := c.Exists(ctx, "locker:{"+k+"}:lock").Val(); n != 0 {
		t.Fatal("an unacknowledged grant was left in place")
	}

	replica := testserver.Replica(t, master)
	rc := newClient(t, replica.Addr)
	waitReplicaOnline(t, c)
	tc := &tripCounter{}
	c.AddHook(tc)
	var l driver.Lease
	trips := tc.count(func() { l = mustAcquire(t, d, req(k, owner(), driver.Exclusive, time.Minute)) })
	if len(trips) > 2 { // one pipeline; a second one if the script was not cached
		t.Errorf("acknowledged TryAcquire: round trips %q", trips)
	}
	if v := rc.Get(ctx, "locker:{"+k+"}:lock").Val(); v == "" {
		t.Fatal("the replica does not have the acknowledged grant")
	}
	if _, err := d.Refresh(ctx, l); err != nil {
		t.Fatal(err)
	}
	ls := mustAcquire(t, d, req(k+"/s", owner(), driver.Shared, time.Minute))
	for i, err := range d.RefreshBatch(ctx, []driver.Lease{l, ls}) {
		if err != nil {
			t.Fatalf("RefreshBatch[%d]: %v", i, err)
		}
	}

	// The replica stops acknowledging.
	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = replica.Resume() }()
	_, err = quick.Refresh(ctx, l)
	wantNotReplicated(t, "Refresh with the replica paused", err)
	for i, err := range quick.RefreshBatch(ctx, []driver.Lease{l, ls}) {
		wantNotReplicated(t, "RefreshBatch with the replica paused", err)
		_ = i
	}
	k2 := uniqueKey(t, "k2")
	_, err = quick.TryAcquire(ctx, req(k2, owner(), driver.Exclusive, time.Minute))
	wantNotReplicated(t, "TryAcquire with the replica paused", err)
	if n := c.Exists(ctx, "locker:{"+k2+"}:lock").Val(); n != 0 {
		t.Fatal("an unacknowledged grant was left in place")
	}
	// The holds stay.
	if _, err := newDriver(t, c).Refresh(ctx, l); err != nil {
		t.Fatalf("hold after an unacknowledged renewal: %v", err)
	}
	if err := replica.Resume(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Refresh(ctx, l); err != nil {
		t.Fatalf("Refresh after the replica resumed: %v", err)
	}
}

// waitReplicaOnline waits until the master of c reports a replica online
// (synchronised, receiving the stream of writes).
func waitReplicaOnline(t *testing.T, c redis.UniversalClient) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(c.Info(ctxT(t), "replication").Val(), ",state=online,") {
		if time.Now().After(deadline) {
			t.Fatalf("no replica online: %s", c.Info(ctxT(t), "replication").Val())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSentinelAckedFailover kills the master right after a grant that its
// replica acknowledged (Options.Replicas = 1), before anything else could
// replicate: Sentinel promotes the replica, which still has the hold; no
// other client acquires the key, and the holder renews it on the new
// master.
func TestSentinelAckedFailover(t *testing.T) {
	drivertest.Long(t, "failover takes seconds")
	master, replica, sentinel, newFailover := sentinelSetup(t)
	d := ackedDriver(t, newFailover(), 1, 2*time.Second)
	other := ackedDriver(t, newFailover(), 1, 2*time.Second)
	k := uniqueKey(t, "k")

	// Wait until Sentinel knows the replica (so that it can fail over)
	// and the replica acknowledges, then grant and kill at once.
	if err := testserver.WaitSentinelReplicas(sentinel, 1, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	var l driver.Lease
	deadline := time.Now().Add(15 * time.Second)
	for {
		var err error
		if l, err = d.TryAcquire(ctxT(t), req(k, owner(), driver.Exclusive, 30*time.Second)); err == nil {
			break
		}
		if !errors.Is(err, redisdriver.ErrNotReplicated) || time.Now().After(deadline) {
			t.Fatalf("acknowledged grant: %v", err)
		}
	}
	ls := mustAcquire(t, d, req(k+"/s", owner(), driver.Shared, 30*time.Second))
	if err := master.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	admin := newClient(t, replica.Addr)
	deadline = time.Now().Add(30 * time.Second)
	for !isMaster(t, admin) {
		if time.Now().After(deadline) {
			t.Fatal("no failover")
		}
		time.Sleep(50 * time.Millisecond)
	}
	promoted := time.Since(killed)
	// No other client gets the keys; the holder renews them once its
	// client has switched to the new master (whose Refresh, with no
	// replica left, is not acknowledged but applied).
	for _, r := range []driver.Request{req(k, owner(), driver.Exclusive, time.Second), req(k+"/s", owner(), driver.Exclusive, time.Second)} {
		deadline = time.Now().Add(30 * time.Second)
		for {
			_, err := other.TryAcquire(ctxT(t), r)
			if errors.Is(err, driver.ErrLocked) {
				break
			}
			if err == nil {
				t.Fatalf("%q acquired by another client after the failover", r.Key)
			}
			if time.Now().After(deadline) {
				t.Fatalf("TryAcquire after the failover: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, h := range []driver.Lease{l, ls} {
		if _, err := d.Refresh(ctxT(t), h); err != nil && !errors.Is(err, redisdriver.ErrNotReplicated) {
			t.Fatalf("Refresh of %q after the failover: %v", h.Key, err)
		}
	}
	t.Logf("replica promoted %v after the kill; both holds kept", promoted.Round(time.Millisecond))
}
