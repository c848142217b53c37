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

// A watchdog renews the leases of one driver and declares holds lost.
//
// One timer per driver (not per lock) serves every hold of the process: the
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
	eng   *engine
	mu    sync.Mutex
	heap  holdHeap
	timer *time.Timer // runs tick; made on first use
	armed time.Time   // when the timer will fire; zero when stopped
}

// add starts renewing h, and listens for the backend's loss reports when
// the driver makes them (driver.LossWatcher).
func (w *watchdog) add(h *hold) {
	w.mu.Lock()
	h.due = h.sent.Add(h.interval)
	heap.Push(&w.heap, h)
	w.armLocked(time.Time{})
	w.mu.Unlock()
	if lw := w.eng.watcher; lw != nil {
		stop := lw.WatchLoss(h.lease, func(err error) { w.lost(h, err) })
		w.mu.Lock()
		h.stopLoss = stop
		w.mu.Unlock()
	}
}

// lost ends h at once because the backend reported it gone.
func (w *watchdog) lost(h *hold, err error) {
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

// remove stops renewing h and waits for a renewal of h that is already on
// its way, so that no renewal is sent for h after remove returns.
func (w *watchdog) remove(h *hold) {
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
		<-flight
	}
}

// tick runs when the timer fires: it declares holds whose deadline passed
// lost and sends the renewals that are due.
func (w *watchdog) tick() {
	w.mu.Lock()
	w.armed = time.Time{}
	now := time.Now()
	var batch, lost, aside []*hold
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
			if cause == nil {
				cause = errors.New("renewal still unanswered")
			}
			lost = append(lost, h)
			causes = append(causes, cause)
		case h.inflight != nil:
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
		h.lose(fmt.Errorf("no renewal confirmed before the local deadline (TTL %v, margin %v): %w", h.ttl, h.margin, causes[i]))
	}
}

// renew sends one batch of renewals and applies the results.
func (w *watchdog) renew(batch []*hold, flight chan struct{}) {
	earliest := batch[0].deadline
	leases := make([]driver.Lease, len(batch))
	for i, h := range batch {
		leases[i] = h.lease
		if h.deadline.Before(earliest) {
			earliest = h.deadline
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), earliest)
	sent := time.Now()
	errs := w.refresh(ctx, leases)
	cancel()

	now := time.Now()
	var lost, failed []*hold
	var lostErrs, failErrs []error
	w.mu.Lock()
	for i, h := range batch {
		h.inflight = nil
		if h.index < 0 {
			continue // unlocked or lost meanwhile
		}
		err := errs[i]
		switch {
		case err == nil:
			h.sent = sent
			h.deadline = sent.Add(h.ttl - h.margin)
			h.due = sent.Add(h.interval)
			h.lastErr = nil
			heap.Fix(&w.heap, h.index)
		case errors.Is(err, driver.ErrNotHeld):
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
	w.mu.Unlock()
	close(flight)

	for i, h := range failed {
		h.cfg.reportError(opError("renew", h.lease.Key, failErrs[i]))
	}
	for i, h := range lost {
		h.lose(lostErrs[i])
	}
}

// refresh renews leases in one batch when the driver can, else one call
// per lease, concurrently.
func (w *watchdog) refresh(ctx context.Context, leases []driver.Lease) []error {
	drv := w.eng.drv
	if len(leases) == 1 {
		_, err := drv.Refresh(ctx, leases[0])
		return []error{err}
	}
	if w.eng.batcher != nil {
		errs := w.eng.batcher.RefreshBatch(ctx, leases)
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
type holdHeap []*hold

func (q holdHeap) Len() int           { return len(q) }
func (q holdHeap) Less(i, j int) bool { return q[i].due.Before(q[j].due) }
func (q holdHeap) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index = i
	q[j].index = j
}
func (q *holdHeap) Push(x any) {
	h := x.(*hold)
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
