package faultproxy_test

import (
	"bufio"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-locker/locker/internal/faultproxy"
	"github.com/go-locker/locker/internal/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer counts the lines it receives and echoes them back.
func echoServer(t *testing.T) (addr string, lines *atomic.Int64) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lines = new(atomic.Int64)
	done := make(chan struct{})
	t.Cleanup(func() { _ = ln.Close(); <-done })
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			go func() {
				r := bufio.NewReader(c)
				for {
					s, err := r.ReadString('\n')
					if err != nil {
						return
					}
					lines.Add(1)
					if _, err := c.Write([]byte(s)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), lines
}

// dial connects to p and checks one healthy round trip.
func dial(t *testing.T, p *faultproxy.Proxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	r := bufio.NewReader(c)
	if s, err := roundTrip(t, c, r, 2*time.Second); err != nil || s != "ping\n" {
		t.Fatalf("healthy round trip: %q, %v", s, err)
	}
	return c, r
}

func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, timeout time.Duration) (string, error) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return "", err
	}
	return r.ReadString('\n')
}

func TestFaults(t *testing.T) {
	addr, lines := echoServer(t)
	p, err := faultproxy.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, r := dial(t, p)

	p.DropReplies(true)
	before := lines.Load()
	if _, err := roundTrip(t, c, r, 200*time.Millisecond); err == nil {
		t.Fatal("a reply got through while replies are dropped")
	}
	if lines.Load() != before+1 {
		t.Fatalf("request not applied while only replies are dropped: %d lines", lines.Load()-before)
	}
	p.Heal()

	// The timed-out read left the connection unusable for framing; use a
	// fresh one.
	c2, r2 := dial(t, p)
	p.Blackhole(true)
	before = lines.Load()
	if _, err := roundTrip(t, c2, r2, 200*time.Millisecond); err == nil {
		t.Fatal("a reply got through a black hole")
	}
	if lines.Load() != before {
		t.Fatal("a request reached the server through a black hole")
	}
	p.Heal()

	c3, r3 := dial(t, p)
	p.Delay(50 * time.Millisecond)
	start := time.Now()
	if _, err := roundTrip(t, c3, r3, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("delayed round trip took %v, want at least 2×50ms", d)
	}
	p.Heal()

	p.Reset()
	if _, err := roundTrip(t, c3, r3, 2*time.Second); err == nil {
		t.Fatal("connection survived Reset")
	}
}

func TestPartition(t *testing.T) {
	addr, lines := echoServer(t)
	p := faultproxy.ForTest(t, addr)
	c, r := dial(t, p)

	p.Partition(true)
	before := lines.Load()
	if _, err := roundTrip(t, c, r, 200*time.Millisecond); err == nil {
		t.Fatal("a reply got through a partition")
	}
	if lines.Load() != before {
		t.Fatal("a request reached the server through a partition")
	}
	// A new connection is refused: the client sees it closed.
	c2, err := net.Dial("tcp", p.Addr())
	if err == nil {
		_ = c2.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := bufio.NewReader(c2).ReadString('\n'); err == nil {
			t.Fatal("a new connection got data during a partition")
		}
		_ = c2.Close()
	}

	// After the partition the held request is applied and its reply
	// delivered, in order, on the same connection.
	p.Heal()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if s, err := r.ReadString('\n'); err != nil || s != "ping\n" {
		t.Fatalf("held reply after the partition: %q, %v", s, err)
	}
	if lines.Load() != before+1 {
		t.Fatalf("%d requests applied after the partition, want 1", lines.Load()-before)
	}
	if s, err := roundTrip(t, c, r, 2*time.Second); err != nil || s != "ping\n" {
		t.Fatalf("round trip after the partition: %q, %v", s, err)
	}
}

func TestNewAt(t *testing.T) {
	addr, _ := echoServer(t)
	p, err := faultproxy.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	at := p.Addr()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	p, err = faultproxy.NewAt(at, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Addr() != at {
		t.Fatalf("Addr() = %s, want %s", p.Addr(), at)
	}
	dial(t, p)
}

func TestPartitioner(t *testing.T) {
	addr, lines := echoServer(t)
	p := faultproxy.Partitioner{Proxy: faultproxy.ForTest(t, addr)}
	c, r := dial(t, p.Proxy)

	// Blackhole holds bytes back: the request arrives after Heal.
	p.Blackhole(true)
	before := lines.Load()
	if _, err := roundTrip(t, c, r, 200*time.Millisecond); err == nil {
		t.Fatal("a reply got through a partition")
	}
	p.Heal()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if s, err := r.ReadString('\n'); err != nil || s != "ping\n" || lines.Load() != before+1 {
		t.Fatalf("held request after Heal: %q, %v, %d applied", s, err, lines.Load()-before)
	}

	// Ending the loss of replies resets the connection that lost them.
	p.DropReplies(true)
	before = lines.Load()
	if _, err := roundTrip(t, c, r, 200*time.Millisecond); err == nil {
		t.Fatal("a reply got through while replies are dropped")
	}
	if lines.Load() != before+1 {
		t.Fatal("request not applied while replies are dropped")
	}
	p.Heal()
	if _, err := roundTrip(t, c, r, 2*time.Second); err == nil {
		t.Fatal("the connection that lost replies survived their end")
	}
	dial(t, p.Proxy)
}
