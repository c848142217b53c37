package zkdriver

import (
	"sync"
	"time"

	"github.com/go-locker/locker/driver/zkdriver/zk"
)

// ReconnectAtOnce returns a go-zookeeper connection option (it sets the
// connection's zk.HostProvider) under which a connection that worked and
// broke is retried at once, and twice more within 200 ms, before
// go-zookeeper's pauses of a second between rounds of tries.
//
// go-zookeeper's default host provider pauses for a second whenever it has
// tried every server since the last good connection; with one server, that
// is before every reconnection. A connection reset then leaves the session
// without a connection for a second, which a lease of a second or two
// cannot absorb, and a session closed by the server (or expired) is
// learnt of only a second later. Under ReconnectAtOnce, the first five
// tries after a good connection broke do not pause (the second to fifth
// wait 50, 150, 300 and 300 ms, so that the tries span the election of a
// new ZooKeeper leader, about half a second); the later ones still do, so
// a server that is down is not hammered.
//
// Connect uses it unless its zkOpts set another host provider; pass it to
// zk.Connect for a connection made for New.
func ReconnectAtOnce() func(*zk.Conn) {
	return zk.WithHostProvider(&quickHostProvider{HostProvider: zk.NewDNSHostProvider()})
}

// quickWaits are the waits before the tries that follow a good
// connection's end, in place of go-zookeeper's pause.
var quickWaits = [...]time.Duration{0, 50 * time.Millisecond, 150 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond}

// quickHostProvider lets the first tries after a good connection go
// without go-zookeeper's pause.
type quickHostProvider struct {
	zk.HostProvider

	mu    sync.Mutex
	quick int // how many of quickWaits are left
}

func (p *quickHostProvider) Next() (string, bool) {
	server, retryStart := p.HostProvider.Next()
	p.mu.Lock()
	var wait time.Duration
	if p.quick > 0 {
		wait = quickWaits[len(quickWaits)-p.quick]
		p.quick--
		retryStart = false
	}
	p.mu.Unlock()
	if wait > 0 {
		time.Sleep(wait)
	}
	return server, retryStart
}

func (p *quickHostProvider) Connected() {
	p.HostProvider.Connected()
	p.mu.Lock()
	p.quick = len(quickWaits)
	p.mu.Unlock()
}
