package driverkit

import "sync"

// A LossCallback holds the function that the front-end passes to
// [driver.LossWatcher.WatchLoss], for drivers that implement it: Fire calls the
// function at most once, and Stop makes sure it is not called afterwards,
// waiting for a call under way, as the stop function WatchLoss returns must.
// The zero value holds no function.
type LossCallback struct {
	mu   sync.Mutex
	lost func(error) // nil once called or stopped
}

// NewLossCallback returns a LossCallback that holds lost.
func NewLossCallback(lost func(error)) *LossCallback {
	return &LossCallback{lost: lost}
}

// Set gives c the function lost, as NewLossCallback does, for a
// LossCallback kept inside a driver's own state (which saves an
// allocation). It must be called before c is shared with another
// goroutine, and at most once.
func (c *LossCallback) Set(lost func(error)) { c.lost = lost }

// Fire calls the function with err unless it was called or stopped. The
// call runs under c's lock, so that Stop waits for it.
func (c *LossCallback) Fire(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.lost; f != nil {
		c.lost = nil
		f(err)
	}
}

// Stop makes sure the function is not called from now on, waiting for a
// call under way.
func (c *LossCallback) Stop() {
	c.mu.Lock()
	c.lost = nil
	c.mu.Unlock()
}
