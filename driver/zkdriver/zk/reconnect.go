package zk

import (
	"sync"
	"time"
)

// WithReconnectAtOnce returns a connection option (a HostProvider over
// DNSHostProvider, locker addition) under which a connection that worked
// and broke is retried at once, then after 50, 150, 300 and 300 ms
// (spanning a leader election), before the pauses of a second between
// rounds over the servers, which a lock lease of a second or two cannot
// absorb.
func WithReconnectAtOnce() connOption {
	return WithHostProvider(&quickHostProvider{HostProvider: NewDNSHostProvider()})
}

// quickWaits are the waits before the tries after a good connection.
var quickWaits = [...]time.Duration{0, 50 * time.Millisecond, 150 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond}

// quickHostProvider lets the first tries after a good connection go
// without the pause.
type quickHostProvider struct {
	HostProvider

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
