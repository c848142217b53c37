package etcdtest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestStart(t *testing.T) {
	m := Start(t)
	c := m.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	r, err := c.Get(ctx, "k")
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v" {
		t.Fatalf("Get = %v, %v", r, err)
	}
	// The minimum lease TTL is 1 s: a request for 1 s is granted as is.
	g, err := c.Grant(ctx, 1)
	if err != nil || g.TTL != 1 {
		t.Fatalf("Grant(1) = %v, %v; want TTL 1", g, err)
	}
}

func TestClusterLeaderStop(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a three-member cluster and its leader's stop take 10s; etcddriver's TestCluster runs them under -short too (LeaderKill)")
	}
	c := StartCluster(t, 3)
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := c.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "k", "1"); err != nil {
		t.Fatal(err)
	}
	pinned := c.Members[l].Client(t)
	if _, err := pinned.Get(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	c.Members[l].Kill()
	// The killed member's clients are cut off.
	gctx, gcancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = pinned.Get(gctx, "k")
	gcancel()
	if err == nil {
		t.Fatal("a Get through the killed member succeeded")
	}
	l2, err := c.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l2 == l {
		t.Fatalf("leader %d still leads after it stopped", l)
	}
	if err := c.WaitReady(ctx, cli); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "k", "2"); err != nil {
		t.Fatal(err)
	}
	if err := c.Members[l].Restart(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Leader(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	g, err := cli.Grant(ctx, 1)
	if err != nil || g.TTL != 1 {
		t.Fatalf("Grant(1) = %v, %v; want TTL 1", g, err)
	}
}

func TestRevokeOldest(t *testing.T) {
	m := Start(t)
	c := m.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := RevokeOldest(ctx, c, "lock/"); err == nil {
		t.Fatal("RevokeOldest with no key succeeded")
	}
	var leases []clientv3.LeaseID
	for _, k := range []string{"lock/b", "lock/a"} { // creation order, not key order
		g, err := c.Grant(ctx, 30)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Put(ctx, k, "", clientv3.WithLease(g.ID)); err != nil {
			t.Fatal(err)
		}
		leases = append(leases, g.ID)
	}
	id, err := RevokeOldest(ctx, c, "lock/")
	if err != nil || id != leases[0] {
		t.Fatalf("RevokeOldest = %x, %v; want %x", id, err, leases[0])
	}
	r, err := c.Get(ctx, "lock/", clientv3.WithPrefix())
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Key) != "lock/a" {
		t.Fatalf("after RevokeOldest: %v, %v; want lock/a only", r.Kvs, err)
	}
}

func TestChild(t *testing.T) {
	c := StartChild(t)
	cli := NewClient(t, c.ClientURL)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	g, err := cli.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	get := func(d time.Duration) error {
		gctx, gcancel := context.WithTimeout(ctx, d)
		defer gcancel()
		r, err := cli.Get(gctx, "k")
		if err == nil && (len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v") {
			t.Fatalf("Get = %v", r.Kvs)
		}
		return err
	}

	if err := c.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := get(500 * time.Millisecond); err == nil {
		t.Fatal("a paused server answered")
	}
	if err := c.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := get(10 * time.Second); err != nil {
		t.Fatalf("after Resume: %v", err)
	}

	pid := c.PID()
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := get(500 * time.Millisecond); err == nil {
		t.Fatal("a killed server answered")
	}
	if err := c.Restart(); err != nil {
		t.Fatal(err)
	}
	if c.PID() == pid || c.PID() == 0 {
		t.Fatalf("Restart: PID %d -> %d", pid, c.PID())
	}
	// The data and the lease survive the crash: the server fsyncs.
	if err := get(10 * time.Second); err != nil {
		t.Fatalf("after Restart: %v", err)
	}
	ttl, err := cli.TimeToLive(ctx, g.ID)
	if err != nil || ttl.TTL <= 0 {
		t.Fatalf("lease after Restart: %v, %v", ttl, err)
	}
}
