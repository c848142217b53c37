package zktest

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy is a loopback TCP proxy in front of one server, for injecting
// network faults into the connections of the clients that dial Addr.
//
// Blackhole(true) silences the connections both ways while keeping the
// sockets open, like a partition: clients see neither an error nor data
// until their own timeouts fire, and what was sent meanwhile arrives when
// it ends. DropReplies(true) drops only the server's
// side, so that requests are applied but their replies lost. Reset closes
// every proxied connection.
type Proxy struct {
	// Addr is the address clients dial instead of the server's.
	Addr string

	up        string
	ln        net.Listener
	blackhole atomic.Bool
	dropDown  atomic.Bool
	refuse    atomic.Bool

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewProxy starts a proxy to upstream for tb and closes it at tb's cleanup.
func NewProxy(tb testing.TB, upstream string) *Proxy {
	tb.Helper()
	p, err := StartProxy(upstream)
	if err != nil {
		tb.Fatalf("zktest: %v", err)
	}
	tb.Cleanup(func() { _ = p.Close() })
	return p
}

// StartProxy starts a proxy to upstream. The caller must Close it.
func StartProxy(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: ln.Addr().String(), up: upstream, ln: ln, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.refuse.Load() {
			c.Close()
			continue
		}
		u, err := net.Dial("tcp", p.up)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, u) {
			c.Close()
			u.Close()
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

// pipe copies src to dst. While the proxy black-holes it holds the data
// back, as a partition does (TCP delivers it once the partition heals);
// for the server-to-client direction (down) it drops the data while the
// proxy drops replies.
func (p *Proxy) pipe(dst, src net.Conn, down bool) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for n > 0 && p.blackhole.Load() && !p.isClosed() {
			time.Sleep(2 * time.Millisecond)
		}
		if n > 0 && !(down && p.dropDown.Load()) {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			src.Close()
			dst.Close()
			p.mu.Lock()
			delete(p.conns, src)
			delete(p.conns, dst)
			p.mu.Unlock()
			return
		}
	}
}

// Blackhole starts (on) or ends (off) a partition: the traffic of the
// proxied connections is held back, both ways, until it ends (or Reset
// closes them). While it is on, new connections are refused, so a client
// cannot get around the partition by reconnecting.
func (p *Proxy) Blackhole(on bool) {
	p.blackhole.Store(on)
	p.refuse.Store(on)
}

// DropReplies starts (on) or ends (off) dropping what the server sends,
// while what clients send still reaches it: requests are applied but their
// replies are lost.
func (p *Proxy) DropReplies(on bool) { p.dropDown.Store(on) }

// Reset closes every proxied connection; clients may reconnect.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Reset()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
