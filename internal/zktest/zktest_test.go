package zktest

import (
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/internal/testflag"
)

func TestStandalone(t *testing.T) {
	start := time.Now()
	s := PrivateStandalone(t)
	t.Logf("standalone server up in %v", time.Since(start))
	mode, err := s.Mode()
	if err != nil || mode != "standalone" {
		t.Fatalf("Mode() = %q, %v; want standalone", mode, err)
	}
	out, err := FourLetter(s.Addr, "ruok")
	if err != nil || out != "imok" {
		t.Fatalf("ruok = %q, %v", out, err)
	}
	pid := s.PID()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.PID() == pid || s.PID() == 0 {
		t.Fatalf("Restart: PID %d -> %d", pid, s.PID())
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Mode(); err == nil {
		t.Fatal("killed server still answers")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestEnsembleLeader(t *testing.T) {
	if !testflag.Long() {
		t.Skip("starts three JVMs")
	}
	start := time.Now()
	e := NewEnsemble(t, 3)
	t.Logf("ensemble up in %v", time.Since(start))
	l, err := e.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	followers := 0
	for _, s := range e.Servers {
		if m, err := s.Mode(); err == nil && m == "follower" {
			followers++
		}
	}
	if followers != 2 {
		t.Fatalf("%d followers; want 2", followers)
	}
	if err := l.Kill(); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	l2, err := e.Leader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l2 == l {
		t.Fatal("the killed server is still the leader")
	}
	t.Logf("new leader %d after %v", l2.ID, time.Since(start))
	if err := l.Restart(); err != nil {
		t.Fatal(err)
	}
	if m, err := l.Mode(); err != nil || m != "follower" {
		t.Fatalf("restarted old leader: mode %q, %v; want follower", m, err)
	}
	if !strings.Contains(strings.Join(e.Addrs(), ","), l.Addr) {
		t.Fatal("Addrs misses a server")
	}
}
