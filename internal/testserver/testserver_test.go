package testserver

import (
	"errors"
	"strings"
	"testing"
	"time"
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
	s := Redis(t)
	if s.External() {
		t.Skip("external server")
	}
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
	s := &Server{Addr: "127.0.0.1:1", external: true}
	for name, f := range map[string]func() error{"Pause": s.Pause, "Resume": s.Resume, "Kill": s.Kill, "Restart": s.Restart} {
		if err := f(); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s = %v, want ErrUnsupported", name, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
