// Package faultproxy is a loopback TCP proxy for fault-injection tests: it
// sits between clients and a server and can black-hole traffic (sockets
// stay open, bytes vanish), partition (sockets stay open, bytes are held
// back until the partition ends, as TCP delivers them after a real one),
// drop only the server's replies (requests are applied, answers lost),
// delay traffic, and reset every connection.
//
// It is for tests on one machine: it listens on 127.0.0.1 only.
package faultproxy

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A Proxy forwards connections from its own address to an upstream address.
type Proxy struct {
	ln       net.Listener
	upstream string

	blackhole   atomic.Bool  // drop bytes in both directions
	partition   atomic.Bool  // hold bytes back in both directions, refuse new connections
	dropReplies atomic.Bool  // drop bytes from upstream to client
	delay       atomic.Int64 // nanoseconds added before each forwarded chunk

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// New starts a proxy on a free loopback port in front of upstream.
func New(upstream string) (*Proxy, error) { return NewAt("127.0.0.1:0", upstream) }

// ForTest starts a proxy in front of upstream for tb and closes it at tb's
// cleanup; it fails tb if the proxy cannot start.
func ForTest(tb testing.TB, upstream string) *Proxy {
	tb.Helper()
	p, err := New(upstream)
	if err != nil {
		tb.Fatalf("faultproxy: %v", err)
	}
	tb.Cleanup(func() { _ = p.Close() })
	return p
}

// NewAt starts a proxy listening on addr in front of upstream, for a proxy
// that must come back on the same address after a Close.
func NewAt(addr, upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, upstream: upstream, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr returns the address clients should dial instead of upstream.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Blackhole makes the proxy swallow every byte in both directions while on
// is true. Connections stay open, as in a network partition; new
// connections are accepted and swallowed too.
func (p *Proxy) Blackhole(on bool) { p.blackhole.Store(on) }

// Partition starts (on) or ends (off) a partition: the bytes of open
// connections are held back, both ways, and forwarded once it ends (or
// dropped by Reset or Close), as TCP retransmits across a real partition;
// new connections are refused meanwhile, so that a client cannot get
// around the partition by reconnecting. Unlike Blackhole, it never tears a
// message in two, so a client's framing survives the partition.
func (p *Proxy) Partition(on bool) { p.partition.Store(on) }

// Partitioner is p as the network of a client whose protocol must see its
// byte stream whole, as TCP delivers it (ZooKeeper's and etcd's framing,
// HTTP/2's streams), for fault tests that call Blackhole, DropReplies and
// Heal: its Blackhole is a Partition, which holds bytes back instead of
// dropping them, and when replies stop being dropped it resets the
// connections, since a stream with a gap cannot go on: on a real network
// the lost replies would have ended the connection, by a timeout or a
// reset, not left a hole in it that stalls the client's calls for ever.
type Partitioner struct{ *Proxy }

// Blackhole starts (on) or ends (off) a partition; see Proxy.Partition.
func (p Partitioner) Blackhole(on bool) { p.Partition(on) }

// DropReplies starts (on) or ends (off) dropping the server's replies;
// ending it resets the connections.
func (p Partitioner) DropReplies(on bool) {
	if was := p.dropReplies.Swap(on); was && !on {
		p.Reset()
	}
}

// Heal turns off every fault, and resets the connections if replies were
// being dropped.
func (p Partitioner) Heal() {
	p.Partition(false)
	p.Proxy.Blackhole(false)
	p.Delay(0)
	p.DropReplies(false)
}

// DropReplies makes the proxy swallow the server's bytes while on is true:
// requests still reach the server and are applied, but their replies are
// lost.
func (p *Proxy) DropReplies(on bool) { p.dropReplies.Store(on) }

// Delay adds d before each chunk the proxy forwards, in both directions.
func (p *Proxy) Delay(d time.Duration) { p.delay.Store(int64(d)) }

// Heal turns off every fault.
func (p *Proxy) Heal() {
	p.Blackhole(false)
	p.Partition(false)
	p.DropReplies(false)
	p.Delay(0)
}

// Reset closes every open connection, as a router reset would; clients see
// their connections fail and must reconnect.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// Close stops the proxy, closes its connections and waits for its
// goroutines to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Reset()
	p.wg.Wait()
	return err
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.partition.Load() {
			_ = c.Close()
			continue
		}
		u, err := net.Dial("tcp", p.upstream)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c, u) {
			_ = c.Close()
			_ = u.Close()
			return
		}
		p.wg.Add(2)
		go p.pipe(u, c, false)
		go p.pipe(c, u, true)
	}
}

func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

// pipe copies src to dst, applying the faults; reply marks the
// upstream-to-client direction.
func (p *Proxy) pipe(dst, src net.Conn, reply bool) {
	defer p.wg.Done()
	defer p.untrack(dst)
	defer p.untrack(src)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for n > 0 && p.partition.Load() && !p.isClosed() {
			time.Sleep(2 * time.Millisecond)
		}
		if n > 0 {
			if d := time.Duration(p.delay.Load()); d > 0 {
				time.Sleep(d)
			}
			drop := p.blackhole.Load() || (reply && p.dropReplies.Load())
			if !drop {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return // EOF or a closed connection: close both sides
		}
	}
}
