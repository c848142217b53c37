// Package lag measures how late this process's timers fire while a test
// times a call, so that a bound on the call's duration can tell a call
// that overshoots its deadline from a machine too loaded to run it on time.
//
// A call that must return by its context's deadline is allowed the
// deadline, a fixed slack, and twice the largest lateness of a 5 ms timer
// seen while it ran: a driver that ignores its deadline overshoots by the
// backend's own timeouts (seconds), far beyond what a loaded machine adds.
package lag

import (
	"sync/atomic"
	"time"
)

// tick is the probe's timer period.
const tick = 5 * time.Millisecond

// A Probe measures timer lateness from Start until Stop.
type Probe struct {
	stop chan struct{}
	done chan struct{}
	max  atomic.Int64 // the largest lateness seen, in ns
}

// Start starts a probe.
func Start() *Probe {
	p := &Probe{stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

func (p *Probe) run() {
	defer close(p.done)
	t := time.NewTimer(tick)
	defer t.Stop()
	for {
		armed := time.Now()
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		if late := time.Since(armed) - tick; late > time.Duration(p.max.Load()) {
			p.max.Store(int64(late))
		}
		t.Reset(tick)
	}
}

// Stop ends the probe and returns the largest lateness it saw. It must be
// called once.
func (p *Probe) Stop() time.Duration {
	close(p.stop)
	<-p.done
	return time.Duration(p.max.Load())
}

// Bound returns how long a call with deadline d may take: d, slack, and
// twice the lateness the probe saw; it stops the probe.
func (p *Probe) Bound(d, slack time.Duration) time.Duration {
	return d + slack + 2*p.Stop()
}
