package zkdriver

import (
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// ReconnectAtOnce returns a go-zookeeper connection option (a
// zk.HostProvider over zk.DNSHostProvider) under which a connection that
// worked and broke is tried again at once, then after 50, 150, 300 and
// 300 ms (spanning a leader election), before go-zookeeper's pause of a
// second per round over the servers, which a lease of a second or two
// cannot absorb. Connect uses it unless its zkOpts set another host
// provider.
func ReconnectAtOnce() func(*zk.Conn) {
	return zk.WithHostProvider(&quickHostProvider{HostProvider: zk.NewDNSHostProvider()})
}

// quickWaits are the waits before the tries after a good connection.
var quickWaits = [...]time.Duration{0, 50 * time.Millisecond, 150 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond}

// quickHostProvider lets the first tries after a good connection go
// without the pause.
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
