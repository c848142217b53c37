package locker

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-locker/locker/driver"
)

// A watchdog renews the leases of one Client and declares holds lost.
//
// One timer per Client (not per lock) serves every hold of the Client: the
// holds sit in a heap ordered by their next event, which is the renewal due
// at sent+interval or, while a renewal is outstanding, the local deadline
// sent+TTL-margin. When the timer fires, renewals that fall due together, or
// within a quarter interval of each other, go out as one batch (one round
// trip on drivers with driver.BatchRefresher). Each batch runs in a
// goroutine of its own under a context that ends at the earliest deadline
// in it, so a renewal that hangs cannot delay the loss of any hold: the
// timer declares the loss when the deadline passes, whatever the call is
// doing. No goroutine runs while no renewal is on its way.
type watchdog struct {
	c      *Client
	mu     sync.Mutex
	heap   holdHeap
	timer  *time.Timer // runs tick; made on first use
	armed  time.Time   // when the timer will fire; zero when stopped
	closed bool        // by Client.Close: no hold is added any more
	// flights counts renewal batches on their way; idle is closed when
	// it drops to 0 after close.
	flights int
	idle    chan struct{}
}

// add starts renewing h (or, for a fixed lease, watching its deadline),
// and listens for the backend's loss reports when the driver makes them
// (driver.LossWatcher). It reports false, and does nothing, once the
// watchdog is closed.
func (w *watchdog) add(h *Hold) bool {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return false
	}
	h.due = h.nextRenewal()
	heap.Push(&w.heap, h)
	w.armLocked(time.Time{})
	w.mu.Unlock()
	if lw := w.c.watcher; lw != nil {
		stop := lw.WatchLoss(h.lease, func(err error) { w.lost(h, err) })
		w.mu.Lock()
		if h.index < 0 {
			// Ended meanwhile: the registration is not needed.
			w.mu.Unlock()
			stop()
			return true
		}
		h.stopLoss = stop
		w.mu.Unlock()
	}
	return true
}

// nextRenewal is when h's next renewal is due after a confirmation: never,
// for a fixed lease, which the watchdog watches only for its deadline.
func (h *Hold) nextRenewal() time.Time {
	if h.fixed {
		return h.deadline
	}
	return h.sent.Add(h.interval)
}

// confirmed records a renewal of h sent at sent that the backend confirmed
// outside the watchdog (Hold.Refresh).
func (w *watchdog) confirmed(h *Hold, sent time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h.index < 0 || !sent.After(h.sent) {
		return
	}
	h.sent = sent
	h.deadline = sent.Add(h.ttl - h.margin)
	h.lastErr = nil
	if h.inflight == nil {
		h.due = h.nextRenewal()
	}
	heap.Fix(&w.heap, h.index)
	w.armLocked(time.Time{})
}

// close stops the watchdog for Client.Close: it returns the holds it
// renewed, removed from the heap and with their loss watches stopped.
func (w *watchdog) close() []*Hold {
	w.mu.Lock()
	w.closed = true
	holds := make([]*Hold, 0, len(w.heap))
	var stops []func()
	for len(w.heap) > 0 {
		h := heap.Pop(&w.heap).(*Hold)
		if h.stopLoss != nil {
			stops = append(stops, h.stopLoss)
			h.stopLoss = nil
		}
		holds = append(holds, h)
	}
	if w.timer != nil {
		w.timer.Stop()
		w.armed = time.Time{}
	}
	w.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
	return holds
}

// flightsDone returns a channel that is closed when no renewal is on its
// way, after close.
func (w *watchdog) flightsDone() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.idle == nil {
		w.idle = make(chan struct{})
		if w.flights == 0 {
			close(w.idle)
		}
	}
	return w.idle
}

// lost ends h at once because the backend reported it gone.
func (w *watchdog) lost(h *Hold, err error) {
	w.mu.Lock()
	if h.index < 0 {
		w.mu.Unlock()
		return // unlocked or already lost
	}
	heap.Remove(&w.heap, h.index)
	w.armLocked(time.Time{})
	w.mu.Unlock()
	if err == nil {
		err = driver.ErrNotHeld
	}
	h.lose(fmt.Errorf("the backend reported the lease gone: %w", err))
}

// armLocked makes the timer fire by the earliest event in the heap. It
// leaves an armed timer alone when the heap is empty or its head is not
// due earlier: a timer that fires early finds nothing to do and re-arms,
// which costs less than stopping and resetting the timer on every lock and
// unlock of an uncontended loop. now is the current time, or zero to read
// it only if needed.
func (w *watchdog) armLocked(now time.Time) {
	if len(w.heap) == 0 {
		return
	}
	next := w.heap[0].due
	if !w.armed.IsZero() && !next.Before(w.armed) {
		return
	}
	if now.IsZero() {
		now = time.Now()
	}
	d := max(next.Sub(now), 0)
	if w.timer == nil {
		w.timer = time.AfterFunc(d, w.tick)
	} else {
		w.timer.Reset(d)
	}
	w.armed = next
}

// stopIdle stops the timer when no hold is left to watch, so that it does
// not keep the Client alive until it fires (a default Client that left
// the registry: shared.go).
func (w *watchdog) stopIdle() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.heap) == 0 && w.timer != nil && !w.armed.IsZero() {
		w.timer.Stop()
		w.armed = time.Time{}
	}
}

// remove stops renewing h, so that no renewal is sent for h after remove
// returns, and waits, until ctx is done, for a renewal of h already on its
// way (its outcome no longer matters: a driver never extends a released
// lease).
func (w *watchdog) remove(ctx context.Context, h *Hold) {
	w.mu.Lock()
	if h.index >= 0 {
		heap.Remove(&w.heap, h.index)
		w.armLocked(time.Time{})
	}
	flight, stop := h.inflight, h.stopLoss
	h.stopLoss = nil
	w.mu.Unlock()
	if stop != nil {
		stop()
	}
	if flight != nil {
		select {
		case <-flight:
		case <-ctx.Done():
		}
	}
}

// tick runs when the timer fires: it declares holds whose deadline passed
// lost and sends the renewals that are due.
func (w *watchdog) tick() {
	w.mu.Lock()
	w.armed = time.Time{}
	now := time.Now()
	var batch, lost, aside []*Hold
	var causes []error
	for len(w.heap) > 0 {
		h := w.heap[0]
		// A hold that is not due yet joins a batch that is going out
		// anyway when it would be due within a quarter interval.
		if h.due.After(now) && (len(batch) == 0 || h.due.After(now.Add(h.interval/4))) {
			break
		}
		heap.Pop(&w.heap)
		switch {
		case !now.Before(h.deadline):
			cause := h.lastErr
			switch {
			case h.fixed:
				cause = errFixedLeaseEnded
			case cause == nil:
				cause = errors.New("renewal still unanswered")
			}
			lost = append(lost, h)
			causes = append(causes, cause)
		case h.fixed || h.inflight != nil:
			aside = append(aside, h) // its renewal is on its way
		default:
			batch = append(batch, h)
		}
	}
	for _, h := range aside {
		heap.Push(&w.heap, h)
	}
	var flight chan struct{}
	if len(batch) > 0 {
		w.flights++
		flight = make(chan struct{})
		for _, h := range batch {
			h.inflight = flight
			h.due = h.deadline
			heap.Push(&w.heap, h)
		}
	}
	w.armLocked(now)
	w.mu.Unlock()

	if len(batch) > 0 {
		go w.renew(batch, flight)
	}
	for i, h := range lost {
		if h.fixed {
			h.lose(fmt.Errorf("%w (TTL %v, margin %v)", causes[i], h.ttl, h.margin))
			continue
		}
		h.lose(fmt.Errorf("no renewal confirmed before the local deadline (TTL %v, margin %v): %w", h.ttl, h.margin, causes[i]))
	}
}

// errFixedLeaseEnded is why a fixed lease (WithFixedLease) ends.
var errFixedLeaseEnded = errors.New("the fixed lease ran out")

// renew sends one batch of renewals and applies the results.
func (w *watchdog) renew(batch []*Hold, flight chan struct{}) {
	earliest := batch[0].deadline
	leases := make([]driver.Lease, len(batch))
	for i, h := range batch {
		leases[i] = h.lease
		if h.deadline.Before(earliest) {
			earliest = h.deadline
		}
	}
	ctx, cancel := context.WithDeadline(w.c.ctx, earliest)
	sent := time.Now()
	errs := w.refresh(ctx, leases)
	cancel()

	now := time.Now()
	var lost, failed []*Hold
	var lostErrs, failErrs []error
	confirmed := false
	w.mu.Lock()
	for i, h := range batch {
		h.inflight = nil
		if h.index < 0 {
			continue // unlocked or lost meanwhile
		}
		err := errs[i]
		switch {
		case err == nil:
			confirmed = true
			if sent.After(h.sent) {
				h.sent = sent
				h.deadline = sent.Add(h.ttl - h.margin)
			}
			h.due = h.nextRenewal()
			h.lastErr = nil
			heap.Fix(&w.heap, h.index)
		case errors.Is(err, driver.ErrNotHeld) || driver.IsPermanent(err):
			// Gone, or no renewal can ever succeed (a closed client).
			heap.Remove(&w.heap, h.index)
			h.lastErr = err
			lost, lostErrs = append(lost, h), append(lostErrs, err)
		default:
			h.lastErr = err
			retry := max(h.interval/4, time.Millisecond)
			h.due = now.Add(retry)
			if h.due.After(h.deadline) {
				h.due = h.deadline
			}
			heap.Fix(&w.heap, h.index)
			failed, failErrs = append(failed, h), append(failErrs, err)
		}
	}
	w.armLocked(now)
	w.flights--
	if confirmed {
		defer w.c.errs.answered()
	}
	if w.flights == 0 && w.idle != nil {
		close(w.idle)
	}
	w.mu.Unlock()
	close(flight)

	for i, h := range failed {
		w.c.reportError(h.cfg, opError("renew", h.lease.Key, failErrs[i]))
		h.observeRenewalFailed(failErrs[i])
	}
	for i, h := range lost {
		h.lose(lostErrs[i])
	}
}

// refresh renews leases in one batch when the driver can, else one call
// per lease, concurrently.
func (w *watchdog) refresh(ctx context.Context, leases []driver.Lease) []error {
	drv := w.c.drv
	if len(leases) == 1 {
		_, err := drv.Refresh(ctx, leases[0])
		return []error{err}
	}
	if w.c.batcher != nil {
		errs := w.c.batcher.RefreshBatch(ctx, leases)
		if len(errs) == len(leases) {
			return errs
		}
		err := fmt.Errorf("driver returned %d results for %d leases", len(errs), len(leases))
		errs = make([]error, len(leases))
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	errs := make([]error, len(leases))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range leases {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, errs[i] = drv.Refresh(ctx, leases[i])
		}()
	}
	wg.Wait()
	return errs
}

// holdHeap orders holds by their next watchdog event.
type holdHeap []*Hold

func (q holdHeap) Len() int           { return len(q) }
func (q holdHeap) Less(i, j int) bool { return q[i].due.Before(q[j].due) }
func (q holdHeap) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index = i
	q[j].index = j
}
func (q *holdHeap) Push(x any) {
	h := x.(*Hold)
	h.index = len(*q)
	*q = append(*q, h)
}
func (q *holdHeap) Pop() any {
	old := *q
	h := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	h.index = -1
	return h
}
