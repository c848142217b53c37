package faultmatrix

import (
	"testing"

	"github.com/go-locker/locker/internal/faultproxy"
)

// calls is a Process that records the calls made to it.
type calls []string

func (c *calls) Pause() error   { *c = append(*c, "Pause"); return nil }
func (c *calls) Resume() error  { *c = append(*c, "Resume"); return nil }
func (c *calls) Kill() error    { *c = append(*c, "Kill"); return nil }
func (c *calls) Restart() error { *c = append(*c, "Restart"); return nil }

// TestProcessTarget checks that ProcessTarget's Target has the name, TTL,
// address and dialer given and controls the process given.
func TestProcessTarget(t *testing.T) {
	var p calls
	tg := ProcessTarget("x", 7, "127.0.0.1:9", nil, &p)
	if tg.Name != "x" || tg.TTL != 7 || tg.Addr() != "127.0.0.1:9" || tg.Dial != nil || tg.Net != nil {
		t.Fatalf("ProcessTarget = %+v", tg)
	}
	for _, f := range []func() error{tg.Server.Pause, tg.Server.Resume, tg.Server.Kill, tg.Server.Restart} {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(p); got != 4 || p[0] != "Pause" || p[1] != "Resume" || p[2] != "Kill" || p[3] != "Restart" {
		t.Fatalf("calls %v; want Pause, Resume, Kill, Restart", p)
	}
}

// TestProxyNet checks that the clients' and children's Net is the proxy
// itself unless the target's Net turns it into another.
func TestProxyNet(t *testing.T) {
	p, err := faultproxy.New("127.0.0.1:9")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	e := &env{tg: Target{}}
	if n, ok := e.proxyNet(p).(*faultproxy.Proxy); !ok || n != p {
		t.Fatalf("proxyNet without Target.Net = %#v; want the proxy", e.proxyNet(p))
	}
	e.tg.Net = Partition
	if n, ok := e.proxyNet(p).(faultproxy.Partitioner); !ok || n.Proxy != p {
		t.Fatalf("proxyNet with Partition = %#v; want a Partitioner of the proxy", e.proxyNet(p))
	}
}
