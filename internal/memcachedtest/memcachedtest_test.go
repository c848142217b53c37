package memcachedtest

import (
	"strings"
	"testing"
	"time"
)

func TestDo(t *testing.T) {
	s := Memcached(t)
	if got, err := Do(s.Addr, "version"); err != nil || !strings.HasPrefix(got, "VERSION ") {
		t.Fatalf("version = %q, %v", got, err)
	}
	if got, err := Do(s.Addr, "incr memcachedtest-missing 1"); err != nil || got != "NOT_FOUND" {
		t.Fatalf("incr of a missing key = %q, %v", got, err)
	}
	if got, err := Do(s.Addr, "get memcachedtest-missing"); err != nil || got != "END" {
		t.Fatalf("get of a missing key = %q, %v", got, err)
	}
	if _, err := Do(s.Addr, "nosuchcommand"); err == nil {
		t.Fatal("unknown command: no error")
	}
	if v, err := Stat(s.Addr, "curr_connections"); err != nil || v == "" {
		t.Fatalf("Stat(curr_connections) = %q, %v", v, err)
	}
}

func TestPauseResumeRestart(t *testing.T) {
	s := Private(t)
	pid := s.PID()
	if pid <= 0 {
		t.Fatalf("PID = %d", pid)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := do(s.Addr, 500*time.Millisecond, "version"); err == nil {
		t.Fatal("paused server answered")
	}
	if time.Since(start) < 400*time.Millisecond /* it must time out, not be refused */ {
		t.Fatal("request to a paused server failed early")
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if _, err := Do(s.Addr, "version"); err != nil {
		t.Fatalf("after Resume: %v", err)
	}
	if _, err := Do(s.Addr, "incr memcachedtest-missing 1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.PID() == pid {
		t.Fatal("Restart kept the PID")
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := Do(s.Addr, "version"); err == nil {
		t.Fatal("killed server answered")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err == nil {
		t.Fatal("Restart after Close: no error")
	}
}

// TestPrivateFlags starts a server with extra flags: -M with a tiny -m
// refuses items once memory is full instead of evicting (-I: an item may
// take at most half of the memory).
func TestPrivateFlags(t *testing.T) {
	s := Private(t, "-M", "-m", "1", "-I", "512k")
	if v, err := Stat(s.Addr, "limit_maxbytes"); err != nil || v != "1048576" {
		t.Fatalf("limit_maxbytes = %q, %v; want 1048576 (-m 1)", v, err)
	}
	if v, err := Do(s.Addr, "stats settings"); err != nil || !strings.Contains(v, "STAT evictions off") {
		t.Fatalf("stats settings: %v; want evictions off (-M):\n%s", err, v)
	}
}
