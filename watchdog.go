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
// One goroutine per driver (not per lock) keeps every hold in a heap ordered
// by its next event: the renewal due at sent+interval, or, while a renewal
// is outstanding, the local deadline sent+TTL-margin. Renewals that fall due
// together, or within a quarter interval of each other, go out as one batch
// (one round trip on drivers with driver.BatchRefresher). Each batch runs in
// a goroutine of its own under a context that ends at the earliest deadline
// in it, so a renewal that hangs cannot delay the loss of any hold: the
// loop declares the loss when the deadline passes, whatever the call is
// doing. The goroutine exits when no hold is left.
type watchdog struct {
	eng     *engine
	mu      sync.Mutex
	heap    holdHeap
	running bool
	flights int
	wake    chan struct{}
}

// add starts renewing h.
func (w *watchdog) add(h *hold) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h.due = h.sent.Add(h.interval)
	heap.Push(&w.heap, h)
	if !w.running {
		w.running = true
		w.wake = make(chan struct{}, 1)
		go w.loop(w.wake)
		return
	}
	w.signalLocked()
}

func (w *watchdog) signalLocked() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// remove stops renewing h and waits for a renewal of h that is already on
// its way, so that no renewal is sent for h after remove returns.
func (w *watchdog) remove(h *hold) {
	w.mu.Lock()
	if h.index >= 0 {
		heap.Remove(&w.heap, h.index)
		w.signalLocked()
	}
	flight := h.inflight
	w.mu.Unlock()
	if flight != nil {
		<-flight
	}
}

func (w *watchdog) loop(wake chan struct{}) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		w.mu.Lock()
		if len(w.heap) == 0 && w.flights == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		now := time.Now()
		var batch, lost []*hold
		var aside []*hold
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
					cause = errors.New("no reply")
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
		if len(batch) > 0 {
			flight := make(chan struct{})
			for _, h := range batch {
				h.inflight = flight
				h.due = h.deadline
				heap.Push(&w.heap, h)
			}
			w.flights++
			go w.renew(batch, flight)
		}
		var wait time.Duration = -1
		if len(w.heap) > 0 {
			wait = max(w.heap[0].due.Sub(now), 0)
		}
		w.mu.Unlock()

		for i, h := range lost {
			h.lose(fmt.Errorf("no renewal confirmed before the local deadline (TTL %v, margin %v): %w", h.ttl, h.margin, causes[i]))
		}
		if len(batch) > 0 || len(lost) > 0 {
			continue
		}
		if wait < 0 {
			<-wake // only flights remain; they signal when done
			continue
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-wake:
			if !timer.Stop() {
				<-timer.C
			}
		}
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
	w.flights--
	w.signalLocked()
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
