package etcdtest

import (
	"io"
	"net"
	"sync"
)

// A proxy forwards TCP connections from a listening address to a member's
// client port, and can reset them all at once.
type proxy struct {
	ln       net.Listener
	upstream string
	wg       sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

func newProxy(addr, upstream string) (*proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, upstream: upstream, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.upstream)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, u) {
			return
		}
		p.wg.Add(2)
		go p.pipe(c, u)
		go p.pipe(u, c)
	}
}

// track registers a connection pair, or closes it if the proxy is closed.
func (p *proxy) track(c, u net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		u.Close()
		return false
	}
	p.conns[c] = struct{}{}
	p.conns[u] = struct{}{}
	return true
}

func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// close stops accepting, resets every connection and waits for the
// proxy's goroutines.
func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // reset, as a crashed host's kernel would
		}
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}
