package natstest

import (
	"net"
	"strings"
	"testing"
)

// TestStart starts a server, checks that it speaks the NATS protocol with
// JetStream on, and restarts it on the same port.
func TestStart(t *testing.T) {
	s := ForTest(t, Options{SyncAlways: true})
	checkInfo(t, s.Addr)
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	checkInfo(t, s.Addr)
}

// TestCluster starts a 3-server cluster and checks that each serves
// clients and knows the others.
func TestCluster(t *testing.T) {
	c := ClusterForTest(t, 3, Options{})
	for _, s := range c.Servers {
		checkInfo(t, s.Addr)
	}
	if got := strings.Count(c.URLs(), "nats://"); got != 3 {
		t.Errorf("URLs %q: %d servers", c.URLs(), got)
	}
	if c.ByName("n2") == nil || c.ByName("n9") != nil {
		t.Error("ByName")
	}
}

// checkInfo reads the INFO line a NATS server sends first and checks that
// JetStream is on.
func checkInfo(t *testing.T, addr string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	line := string(buf[:n])
	if !strings.HasPrefix(line, "INFO ") || !strings.Contains(line, `"jetstream":true`) {
		t.Errorf("%s sent %q", addr, line)
	}
}
