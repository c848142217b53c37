package lockertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
)

// hammerTime bounds how long the hammer tests run; each goroutine stops
// earlier when it has done its iterations.
const hammerTime = 2 * time.Second

// mutexHammer is the state testMutexHammer's goroutines share.
type mutexHammer struct {
	e          *env
	key        string
	iterations int
	stop       time.Time
	counter    int          // guarded by the lock under test
	lastToken  locker.Token // guarded by the lock under test
	holders    atomic.Int32
	locks      atomic.Int64
}

// testMutexHammer locks one key from many handles on several clients, and
// from goroutines sharing a handle: no two hold it at once, writes made
// under the lock are seen by the next holder (the race detector checks
// that), and tokens grow in the order of acquisition.
func testMutexHammer(e *env) {
	const clients, perClient, sharing, iterations = 3, 4, 3, 50
	ds := e.drivers(clients)
	h := &mutexHammer{e: e, key: e.key("k"), iterations: iterations, stop: time.Now().Add(hammerTime)}
	opts := []locker.Option{locker.WithTTL(e.long), locker.WithErrorHandler(func(err error) {
		e.errorf("Mutex error handler: %v", err)
	})}

	var wg sync.WaitGroup
	for i := range clients * perClient {
		m := locker.NewMutex(ds[i%clients], h.key, opts...)
		wg.Add(1)
		go func() { defer wg.Done(); h.hammer(m, true) }()
	}
	common := locker.NewMutex(ds[0], h.key, opts...)
	for range sharing {
		wg.Add(1)
		go func() { defer wg.Done(); h.hammer(common, false) }()
	}
	wg.Wait()
	if n := h.locks.Load(); int64(h.counter) != n {
		e.errorf("counter = %d after %d locked increments; want equal", h.counter, n)
	} else if n == 0 {
		e.errorf("no goroutine locked %q", h.key)
	}
	e.t.Logf("%d locks in %v", h.locks.Load(), hammerTime-time.Until(h.stop))
	e.expectFree(ds[1], h.key, driver.Exclusive, "after every Mutex was unlocked")
}

// hammer locks and unlocks m until it has done its iterations or the
// hammer time is over; own says m is not shared with other goroutines.
func (h *mutexHammer) hammer(m *locker.Mutex, own bool) {
	e := h.e
	for i := 0; i < h.iterations && time.Now().Before(h.stop) && e.ctx.Err() == nil; i++ {
		locked, ok := h.lock(m, i)
		if !ok {
			return
		}
		if !locked {
			continue
		}
		done := m.Done()
		h.critical(m, i)
		h.locks.Add(1)
		if i%2 == 0 {
			m.Unlock()
		} else if err := m.UnlockContext(e.ctx); err != nil {
			e.errorf("Mutex.UnlockContext: %v", err)
		}
		h.checkReleased(m, done, own)
	}
}

// lock takes m by Lock, LockContext or TryLock as i says; locked is false
// when TryLock found it held, ok is false when the goroutine must stop.
func (h *mutexHammer) lock(m *locker.Mutex, i int) (locked, ok bool) {
	e := h.e
	switch i % 3 {
	case 0:
		m.Lock()
	case 1:
		if err := m.LockContext(e.ctx); err != nil {
			if e.ctx.Err() == nil {
				e.errorf("Mutex.LockContext: %v", err)
			}
			return false, false
		}
	case 2:
		if !m.TryLock() {
			return false, true
		}
	}
	return true, true
}

// critical runs while m is held, sometimes long enough for an
// overlapping holder to be seen.
func (h *mutexHammer) critical(m *locker.Mutex, i int) {
	e := h.e
	if n := h.holders.Add(1); n != 1 {
		e.errorf("%d Mutex handles hold %q at once", n, h.key)
	}
	if i%2 == 0 {
		time.Sleep(200 * time.Microsecond)
	}
	tok := m.Token()
	if tok <= h.lastToken {
		e.errorf("Mutex.Token() = %d after an earlier holder's %d; want strictly increasing tokens", tok, h.lastToken)
	}
	h.lastToken = tok
	h.counter++
	select {
	case <-m.Done():
		e.errorf("Mutex.Done() closed while the mutex is held: %v", m.Err())
	default:
	}
	h.holders.Add(-1)
}

// checkReleased checks, after an unlock, that the hold's Done channel is
// closed and, on a handle no other goroutine uses, that Err is nil.
func (h *mutexHammer) checkReleased(m *locker.Mutex, done <-chan struct{}, own bool) {
	e := h.e
	select {
	case <-done:
	default:
		e.errorf("the Done channel of a hold is still open after its Unlock returned")
	}
	if own {
		if err := m.Err(); err != nil {
			e.errorf("Mutex.Err() after Unlock = %v; want nil", err)
		}
	}
}

// testRWMutexHammer streams readers and writers on several clients: a
// writer holds the key alone, and a writer waiting behind a stream of
// readers gets the lock in bounded time (on a driver with a wait queue,
// Capabilities.Queue; without one,
// fairness across processes is not promised and the wait is only logged).
func testRWMutexHammer(e *env) {
	e.skipUnlessShared()
	const clients, readers, writers = 3, 6, 2
	fair := e.caps.Queue
	ds := e.drivers(clients)
	h := &rwHammer{e: e, key: e.key("k"), fair: fair, stopReaders: make(chan struct{}),
		deadline: time.Now().Add(hammerTime + rwStarved)}
	opts := []locker.Option{locker.WithTTL(e.long), locker.WithErrorHandler(func(err error) {
		e.errorf("RWMutex error handler: %v", err)
	})}
	var rg, wg sync.WaitGroup
	for i := range readers {
		rw := locker.NewRWMutex(ds[i%clients], h.key, opts...)
		rg.Add(1)
		go func() { defer rg.Done(); h.reader(rw) }()
	}
	for i := range writers {
		rw := locker.NewRWMutex(ds[(i+1)%clients], h.key, opts...)
		wg.Add(1)
		go func() { defer wg.Done(); h.writer(rw) }()
	}
	wg.Wait()
	close(h.stopReaders)
	rg.Wait()
	e.t.Logf("%d reads, %d writes, at most %d readers at once, longest writer wait %v", h.reads.Load(), h.counter, h.peak.Load(), time.Duration(h.longestWait.Load()))
	if h.peak.Load() < 2 {
		e.t.Logf("note: readers never overlapped; shared mode was not exercised under load")
	}
	e.expectFree(ds[0], h.key, driver.Exclusive, "after every RWMutex was unlocked")
}

// rwStarved is how long a writer of testRWMutexHammer may wait.
const rwStarved = 5 * time.Second

// rwHammer is the state that the readers and writers of testRWMutexHammer
// share.
type rwHammer struct {
	e           *env
	key         string
	fair        bool          // the driver keeps a wait queue (Capabilities.Queue): a starved writer fails the test
	stopReaders chan struct{} // closed when the writers are done
	deadline    time.Time     // the readers stop by then in any case

	counter              int // guarded by the lock under test
	inReaders, inWriters atomic.Int32
	peak                 atomic.Int64 // most readers at once
	reads                atomic.Int64
	longestWait          atomic.Int64 // of a writer, in nanoseconds
}

// storeMax makes a at least v.
func storeMax(a *atomic.Int64, v int64) {
	for old := a.Load(); v > old && !a.CompareAndSwap(old, v); old = a.Load() {
	}
}

// running reports whether the readers go on.
func (h *rwHammer) running() bool {
	select {
	case <-h.stopReaders:
		return false
	case <-h.e.ctx.Done():
		return false
	default:
		return time.Now().Before(h.deadline)
	}
}

// reader read-locks the key in turn with RLock, RLockContext and
// TryRLock, until the writers are done.
func (h *rwHammer) reader(rw *locker.RWMutex) {
	for i := 0; h.running(); i++ {
		switch i % 3 {
		case 0:
			rw.RLock()
		case 1:
			if err := rw.RLockContext(h.e.ctx); err != nil {
				if h.e.ctx.Err() == nil {
					h.e.errorf("RWMutex.RLockContext: %v", err)
				}
				return
			}
		case 2:
			if !rw.TryRLock() {
				continue
			}
		}
		h.read()
		if i%2 == 0 {
			rw.RUnlock()
		} else if err := rw.RUnlockContext(h.e.ctx); err != nil {
			h.e.errorf("RWMutex.RUnlockContext: %v", err)
		}
	}
}

// read is a reader's critical section: no writer may hold the key.
func (h *rwHammer) read() {
	n := h.inReaders.Add(1)
	storeMax(&h.peak, int64(n))
	if w := h.inWriters.Load(); w != 0 {
		h.e.errorf("a reader holds %q together with %d writers", h.key, w)
	}
	if h.counter < 0 { // a read the race detector orders after the writers' writes
		h.e.errorf("counter = %d", h.counter)
	}
	h.reads.Add(1)
	time.Sleep(2 * time.Millisecond)
	h.inReaders.Add(-1)
}

// writer write-locks the key a few times, each time within rwStarved.
func (h *rwHammer) writer(rw *locker.RWMutex) {
	const writes = 5
	for range writes {
		if !h.e.sleep(5*time.Millisecond) || !h.write(rw) {
			return
		}
	}
}

// write locks rw, waiting at most rwStarved, and increments the counter
// alone. It reports whether the writer goes on.
func (h *rwHammer) write(rw *locker.RWMutex) bool {
	e := h.e
	start := time.Now()
	ctx, cancel := context.WithTimeout(e.ctx, rwStarved)
	err := rw.LockContext(ctx)
	cancel()
	storeMax(&h.longestWait, int64(time.Since(start)))
	if err != nil {
		switch {
		case e.ctx.Err() != nil:
		case h.fair && errors.Is(err, context.DeadlineExceeded):
			e.errorf("a writer waited %v for %q behind a stream of readers on a driver with a wait queue; want it served", rwStarved, h.key)
		case errors.Is(err, context.DeadlineExceeded):
			e.t.Logf("a writer waited %v for %q behind a stream of readers (no wait queue, so not a failure)", rwStarved, h.key)
		default:
			e.errorf("RWMutex.LockContext: %v", err)
		}
		return false
	}
	if w, r := h.inWriters.Add(1), h.inReaders.Load(); w != 1 || r != 0 {
		e.errorf("a writer holds %q together with %d writers and %d readers", h.key, w-1, r)
	}
	h.counter++
	h.inWriters.Add(-1)
	rw.Unlock()
	return true
}

// testMutexBasics checks that a Mutex hold is a driver hold: other
// handles and other owners are excluded, and Unlock frees the key.
func testMutexBasics(e *env) {
	ds := e.drivers(2)
	key := e.key("k")
	m1 := locker.NewMutex(ds[0], key, locker.WithTTL(e.long))
	m2 := locker.NewMutex(ds[1], key, locker.WithTTL(e.long))
	if err := m1.LockContext(e.ctx); err != nil {
		e.t.Fatalf("Mutex.LockContext: %v", err)
	}
	tok := m1.Token()
	if tok == 0 {
		e.t.Errorf("Mutex.Token() = 0 while held")
	}
	if m2.TryLock() {
		e.t.Errorf("TryLock of a second Mutex on another client succeeded while the first holds the key")
		m2.Unlock()
	}
	if ok, err := m2.TryLockContext(e.ctx); ok || err != nil {
		e.t.Errorf("TryLockContext of a second Mutex while the first holds the key = %v, %v; want false, nil", ok, err)
	}
	e.expectLocked(ds[1], key, driver.Exclusive, time.Now(), time.Hour) // held through the watchdog
	done := m1.Done()
	if err := m1.UnlockContext(e.ctx); err != nil {
		e.t.Errorf("Mutex.UnlockContext: %v", err)
	}
	select {
	case <-done:
	default:
		e.t.Errorf("Mutex.Done() still open after Unlock")
	}
	if err := m1.Err(); err != nil {
		e.t.Errorf("Mutex.Err() after Unlock = %v; want nil", err)
	}
	if ok, err := m2.TryLockContext(e.ctx); !ok || err != nil {
		e.t.Fatalf("TryLockContext after the holder unlocked = %v, %v; want true, nil", ok, err)
	}
	if t2 := m2.Token(); t2 <= tok {
		e.t.Errorf("Mutex.Token() = %d after an earlier hold's %d; want strictly increasing tokens", t2, tok)
	}
	if err := m2.UnlockContext(e.ctx); err != nil {
		e.t.Errorf("Mutex.UnlockContext: %v", err)
	}
	if err := m2.UnlockContext(e.ctx); !errors.Is(err, locker.ErrNotHeld) {
		e.t.Errorf("second Mutex.UnlockContext = %v; want an error wrapping ErrNotHeld", err)
	}
	e.expectFree(ds[0], key, driver.Exclusive, "after every Mutex was unlocked")
}

// testMutexRenewal checks that the front-end's renewals, through Refresh
// or RefreshBatch, keep a Mutex's lease alive on the backend past its TTL.
func testMutexRenewal(e *env) {
	ds := e.drivers(2)
	key := e.key("k")
	m := locker.NewMutex(ds[0], key, locker.WithTTL(e.medium))
	if err := m.LockContext(e.ctx); err != nil {
		e.t.Fatalf("Mutex.LockContext: %v", err)
	}
	defer m.Unlock()
	if !e.sleep(2 * e.medium) {
		return
	}
	r := req(key, driver.Exclusive, e.long)
	l, err := ds[1].TryAcquire(e.ctx, r)
	// The front-end declares a hold lost before the backend can let it
	// go, so a hold it still has after the attempt was held during it.
	held := true
	select {
	case <-m.Done():
		held = false
	default:
	}
	switch {
	case err == nil:
		ds[1].Release(e.ctx, l)
		if held {
			e.t.Errorf("another owner acquired %q %v after a Mutex locked it with TTL %v, while the Mutex still held it: its renewals (Refresh or RefreshBatch) did not extend the lease", key, 2*e.medium, e.medium)
		} else {
			e.inconclusive(fmt.Sprintf("the Mutex lost its hold, perhaps because the machine is slow: %v", m.Err()))
		}
	case !held:
		e.inconclusive(fmt.Sprintf("the Mutex lost its hold, perhaps because the machine is slow: %v", m.Err()))
	default:
		e.checkLocked(r, err, e.medium)
	}
}

// testLockerContextCanceled checks that a LockContext that gives up leaves
// nothing held or queued on the backend once the Client's background
// cleanup for the key is over (the Client's next lock call for the key
// waits for it), also when the key is freed just as it gives up.
func testLockerContextCanceled(e *env) {
	ds := e.drivers(3)
	key := e.key("k")
	hr := req(key, driver.Exclusive, e.long)
	hl, _ := e.acquire(ds[0], hr)
	c := locker.New(ds[1], locker.WithTTL(e.long))
	defer c.Close(e.ctx)
	m := c.Mutex(key)

	checkLockGivesUp(e, m)
	// A queue entry of the waiter would have a long TTL: had it been left
	// behind, a newcomer could not take the key.
	e.release(ds[0], hl)
	e.settle(c, key)
	e.expectFree(ds[2], key, driver.Exclusive, "right after the holder released, once a waiter's LockContext had given up (a hold or queue entry left behind?)")

	if e.caps.Queue {
		checkWokenWaiterGivesUp(e, ds, c, m, key)
	}
	checkGiveUpRacesRelease(e, ds, c, m, key)
}

// checkLockGivesUp checks that LockContext and TryLockContext on m, whose
// key another owner holds, return the error of a context that times out,
// is cancelled while waiting, or is cancelled already.
func checkLockGivesUp(e *env, m *locker.Mutex) {
	ctx, cancel := context.WithTimeout(e.ctx, 300*time.Millisecond)
	err := m.LockContext(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		e.t.Errorf("Mutex.LockContext with a context that times out while another owner holds the key = %v; want an error wrapping context.DeadlineExceeded", err)
	}
	ctx, cancel = context.WithCancel(e.ctx)
	time.AfterFunc(100*time.Millisecond, cancel)
	err = m.LockContext(ctx)
	cancel()
	if !errors.Is(err, context.Canceled) {
		e.t.Errorf("Mutex.LockContext with a context cancelled while another owner holds the key = %v; want an error wrapping context.Canceled", err)
	}
	ctx, cancel = context.WithCancel(e.ctx)
	cancel()
	if ok, err := m.TryLockContext(ctx); ok || err == nil {
		e.t.Errorf("Mutex.TryLockContext with a cancelled context = %v, %v; want false and an error", ok, err)
	}
}

// checkWokenWaiterGivesUp checks that a waiter that is woken by a release
// but finds another owner queued ahead of it, and so has waited long
// enough to join the backend's wait queue itself, leaves the queue when
// it gives up.
func checkWokenWaiterGivesUp(e *env, ds []driver.Driver, c *locker.Client, m *locker.Mutex, key string) {
	ha, _ := e.acquire(ds[0], req(key, driver.Exclusive, e.long))
	qr := req(key, driver.Exclusive, e.long)
	qr.Queued = true
	if _, err := ds[0].TryAcquire(e.ctx, qr); !errors.Is(err, driver.ErrLocked) {
		e.t.Fatalf("TryAcquire(%s) while another owner holds the key: %v; want ErrLocked", fmtReq(qr), err)
	}
	ctx, cancel := context.WithTimeout(e.ctx, 400*time.Millisecond)
	errc := make(chan error, 1)
	go func() { errc <- m.LockContext(ctx) }()
	e.sleep(100 * time.Millisecond)
	e.release(ds[0], ha) // wakes the waiter, which finds qr at the head
	e.sleep(100 * time.Millisecond)
	hq, _ := e.acquireQueued(ds[0], qr)
	err := <-errc
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		e.t.Errorf("Mutex.LockContext with a context that times out while other owners hold the key or are queued ahead = %v; want an error wrapping context.DeadlineExceeded", err)
		if err == nil {
			m.Unlock()
		}
	}
	e.release(ds[0], hq)
	e.settle(c, key)
	e.expectFree(ds[2], key, driver.Exclusive, "right after the holder released, once a waiter that had been woken and found another owner queued ahead had given up (a queue entry left behind?)")
}

// checkGiveUpRacesRelease frees the key just as the waiter gives up:
// whichever way the race goes, no hold is left unless LockContext
// reports one.
func checkGiveUpRacesRelease(e *env, ds []driver.Driver, c *locker.Client, m *locker.Mutex, key string) {
	for i := range 5 {
		hl, _ := e.acquire(ds[0], req(key, driver.Exclusive, e.long))
		wait := time.Duration(20+10*i) * time.Millisecond
		released := make(chan error, 1)
		time.AfterFunc(wait, func() { released <- ds[0].Release(e.ctx, hl) })
		ctx, cancel := context.WithTimeout(e.ctx, wait)
		err := m.LockContext(ctx)
		cancel()
		if err := <-released; err != nil {
			e.t.Errorf("Release(%s): %v", fmtLease(hl), err)
		}
		if err == nil {
			e.expectLocked(ds[2], key, driver.Exclusive, time.Now(), time.Hour)
			m.Unlock()
		} else if !errors.Is(err, context.DeadlineExceeded) {
			e.t.Errorf("Mutex.LockContext: %v; want nil or an error wrapping context.DeadlineExceeded", err)
		}
		e.settle(c, key)
		e.expectFree(ds[2], key, driver.Exclusive, fmt.Sprintf("after a LockContext that returned %v raced with the holder's release", err))
	}
}

// settle waits for the background cleanup that abandoned lock calls of c
// left for key: a lock call for the key through c waits for it (if that
// finds the key held, expectFree reports what was left).
func (e *env) settle(c *locker.Client, key string) {
	e.t.Helper()
	m := c.Mutex(key)
	if ok, err := m.TryLockContext(e.ctx); ok {
		if err := m.UnlockContext(e.ctx); err != nil {
			e.t.Errorf("Mutex.UnlockContext: %v", err)
		}
	} else if err != nil {
		e.t.Errorf("Mutex.TryLockContext: %v", err)
	}
}
