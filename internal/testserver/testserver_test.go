package testserver

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/internal/proc"
	"github.com/go-locker/locker/internal/testflag"
)

func TestRedisPing(t *testing.T) {
	s := Redis(t)
	if got, err := Do(s.Addr, "PING"); err != nil || got != "PONG" {
		t.Fatalf("PING = %q, %v", got, err)
	}
	if got, err := Do(s.Addr, "SET", "k", "v"); err != nil || got != "OK" {
		t.Fatalf("SET = %q, %v", got, err)
	}
	if got, err := Do(s.Addr, "GET", "k"); err != nil || got != "v" {
		t.Fatalf("GET = %q, %v", got, err)
	}
	if _, err := Do(s.Addr, "NOSUCHCOMMAND"); err == nil {
		t.Fatal("unknown command: no error")
	}
}

func TestPauseResumeRestart(t *testing.T) {
	s := PrivateRedis(t)
	pid := s.PID()
	if pid <= 0 {
		t.Fatalf("PID = %d", pid)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := ping(s.Addr); err == nil {
		t.Fatal("paused server answered PING")
	}
	if time.Since(start) < time.Second/2 /* it must time out, not be refused */ {
		t.Fatalf("PING to a paused server failed early")
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := ping(s.Addr); err != nil {
		t.Fatalf("after Resume: %v", err)
	}
	if _, err := Do(s.Addr, "SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.PID() == pid {
		t.Fatal("Restart kept the PID")
	}
	if got, err := Do(s.Addr, "GET", "k"); err != nil || got != "" {
		t.Fatalf("GET after Restart = %q, %v; want the data lost", got, err)
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := ping(s.Addr); err == nil {
		t.Fatal("killed server answered PING")
	}
	if err := s.Kill(); err == nil {
		t.Fatal("second Kill: no error")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err == nil {
		t.Fatal("Restart after Close: no error")
	}
}

func TestCluster(t *testing.T) {
	s := RedisCluster(t)
	info, err := Do(s.Addr, "CLUSTER", "INFO")
	if err != nil {
		t.Fatal(err)
	}
	if want := "cluster_slots_assigned:16384"; !strings.Contains(info, want) {
		t.Fatalf("CLUSTER INFO lacks %q:\n%s", want, info)
	}
}

func TestExternalUnsupported(t *testing.T) {
	s := &Server{Addr: "127.0.0.1:1", Server: proc.NewExternal("testserver", "127.0.0.1:1")}
	for name, f := range map[string]func() error{"Pause": s.Pause, "Resume": s.Resume, "Kill": s.Kill, "Restart": s.Restart} {
		if err := f(); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s = %v, want ErrUnsupported", name, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestSentinelFailover(t *testing.T) {
	if !testflag.Long() {
		t.Skip("failover takes seconds")
	}
	master := PrivateRedis(t)
	replica := Replica(t, master)
	sentinel := Sentinel(t, master)
	waitFor(t, "replica in sync", func() bool {
		info, err := Do(replica.Addr, "INFO", "replication")
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
	waitFor(t, "sentinel sees the replica", func() bool {
		n, err := Do(sentinel.Addr, "SENTINEL", "REPLICAS", SentinelMaster)
		return err == nil && n == "1"
	})
	if err := master.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "replica promoted", func() bool {
		info, err := Do(replica.Addr, "INFO", "replication")
		return err == nil && strings.Contains(info, "role:master")
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRedisClusterHA starts a cluster of three masters with a replica
// each, and fails a master over to its replica by killing it.
func TestRedisClusterHA(t *testing.T) {
	if !testflag.Long() {
		t.Skip("a failover takes seconds")
	}
	c := RedisClusterHA(t, 3)
	nodes, err := Do(c.Masters[0].Addr, "CLUSTER", "NODES")
	if err != nil {
		t.Fatal(err)
	}
	if m, s := strings.Count(nodes, "master"), strings.Count(nodes, "slave"); m != 3 || s != 3 {
		t.Fatalf("CLUSTER NODES: %d masters, %d replicas, want 3 and 3:\n%s", m, s, nodes)
	}
	if err := c.Masters[1].Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	err = proc.Poll("failover", 30*time.Second, 20*time.Millisecond, nil, func() error {
		info, err := Do(c.Replicas[1].Addr, "INFO", "replication")
		if err != nil {
			return err
		}
		if !strings.Contains(info, "role:master") {
			return errors.New("not promoted yet")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("replica promoted %v after its master was killed", time.Since(killed).Round(time.Millisecond))
}
