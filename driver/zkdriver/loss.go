package zkdriver

import (
	"fmt"
	"slices"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
)

// sessionEnded is called when session id, which the driver follows, is
// over: every node of that session is gone.
func (d *Driver) sessionEnded(id int64, cause error) {
	d.mu.Lock()
	var fire []*lossWatch
	for k, n := range d.nodes {
		if n.session != id {
			continue
		}
		if !n.granted { // its waiter sees the session end
			if n.path != "" {
				delete(d.nodes, k)
			}
			continue
		}
		fire = append(fire, n.lose(cause)...)
	}
	d.mu.Unlock()
	fireAll(fire, fmt.Errorf("%w: ZooKeeper session 0x%x ended: %w", driver.ErrNotHeld, id, cause))
}

// lose marks n lost for cause (unless it already is) and takes its
// watches; d.mu is held.
func (n *node) lose(cause error) []*lossWatch {
	if n.lost == nil {
		n.lost = cause
	}
	ws := n.watches
	n.watches = nil
	return ws
}

// lossWatch is one WatchLoss registration.
type lossWatch = driverkit.LossCallback

// fireAll calls the functions of ws in a goroutine of the driver's.
func fireAll(ws []*lossWatch, err error) {
	if len(ws) == 0 {
		return
	}
	go func() {
		for _, w := range ws {
			w.Fire(err)
		}
	}()
}

// WatchLoss implements driver.LossWatcher: lost is called when the session
// that holds l's node ends (or the driver is closed), at once if l is not
// a live hold of this driver. A disconnection is not a loss.
func (d *Driver) WatchLoss(l driver.Lease, lost func(err error)) (stop func()) {
	d.mu.Lock()
	n := d.nodes[nodeKey{l.Key, l.Owner}]
	why := n.mismatch(l)
	switch {
	case d.closed:
		why = ErrClosed
	case why == nil && !live(d.state(n.session)):
		why = errSessionEnded
	}
	if why != nil {
		d.mu.Unlock()
		w := driverkit.NewLossCallback(lost)
		fireAll([]*lossWatch{w}, fmt.Errorf("%w: %w", driver.ErrNotHeld, why))
		return w.Stop
	}
	// The usual single watch of a hold costs no allocation (an
	// uncontended pair allocates as much as zk.Lock's).
	w := &n.loss0
	if n.loss0Set {
		w = driverkit.NewLossCallback(lost)
	} else {
		n.loss0Set = true
		w.Set(lost)
	}
	if n.watches == nil {
		n.watches = n.watch0[:0]
	}
	n.watches = append(n.watches, w)
	d.mu.Unlock()
	return func() {
		d.mu.Lock()
		n.watches = slices.DeleteFunc(n.watches, func(x *lossWatch) bool { return x == w })
		d.mu.Unlock()
		w.Stop()
	}
}
