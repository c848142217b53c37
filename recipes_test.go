package locker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
)

// bare hides every optional interface of the driver it wraps.
type bare struct{ d driver.Driver }

func (b bare) TryAcquire(ctx context.Context, r driver.Request) (driver.Lease, error) {
	return b.d.TryAcquire(ctx, r)
}
func (b bare) Refresh(ctx context.Context, l driver.Lease) (driver.Lease, error) {
	return b.d.Refresh(ctx, l)
}
func (b bare) Release(ctx context.Context, l driver.Lease) error { return b.d.Release(ctx, l) }

// counting is bare plus shared and counted requests: no queue, so that
// only the Client's own line orders waiters.
type counting struct{ bare }

func (counting) Capabilities() driver.Capabilities {
	return driver.Capabilities{Shared: true, Counted: true}
}

func TestRecipesUnsupported(t *testing.T) {
	c := locker.New(bare{memdriver.New()})
	defer c.Close(context.Background())
	ctx := context.Background()
	if _, err := c.Semaphore("s", 2).Acquire(ctx, 1); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Semaphore.Acquire on a driver without Counter: %v; want ErrUnsupported", err)
	}
	e := c.Election("e")
	if _, err := e.Campaign(ctx, "v"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Election.Campaign on a driver without values: %v; want ErrUnsupported", err)
	}
	if _, err := e.Leader(ctx); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Election.Leader on a driver without Inspector: %v; want ErrUnsupported", err)
	}
	if _, err := e.Observe(ctx); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Election.Observe on a driver without Inspector: %v; want ErrUnsupported", err)
	}
}

// TestSemaphoreLocalFIFO checks that the Client's line does not let a
// small request overtake a large one that waits, even where the backend
// keeps no queue.
func TestSemaphoreLocalFIFO(t *testing.T) {
	c := locker.New(counting{bare{memdriver.New()}}, locker.WithBackoff(time.Millisecond, 5*time.Millisecond))
	defer c.Close(context.Background())
	ctx := context.Background()
	s := c.Semaphore("pool", 2)
	h1, err := s.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	big := make(chan *locker.Hold, 1)
	go func() {
		h, err := s.Acquire(ctx, 2)
		if err != nil {
			t.Errorf("Acquire(2): %v", err)
		}
		big <- h
	}()
	time.Sleep(50 * time.Millisecond)
	if h, err := s.TryAcquire(ctx, 1); !errors.Is(err, locker.ErrLocked) {
		t.Errorf("TryAcquire(1) while an Acquire(2) waits: %v; want ErrLocked", err)
		if h != nil {
			h.Release(ctx)
		}
	}
	h1.Release(ctx)
	if h2 := <-big; h2 != nil {
		if h2.Weight() != 2 {
			t.Errorf("Weight of Acquire(2)'s hold = %d", h2.Weight())
		}
		h2.Release(ctx)
	}
}

func TestSemaphoreMisuse(t *testing.T) {
	c := locker.New(memdriver.New())
	defer c.Close(context.Background())
	ctx := context.Background()
	s := c.Semaphore("pool", 3)
	h, err := s.Acquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Release(ctx); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("a second Release of a permit hold: %v; want ErrNotHeld", err)
	}
	for _, w := range []int64{0, -1, 4} {
		if _, err := s.Acquire(ctx, w); !errors.Is(err, locker.ErrInvalidWeight) {
			t.Errorf("Acquire(%d) of a Semaphore of 3: %v; want ErrInvalidWeight", w, err)
		}
		if _, err := s.TryAcquire(ctx, w); !errors.Is(err, locker.ErrInvalidWeight) {
			t.Errorf("TryAcquire(%d) of a Semaphore of 3: %v; want ErrInvalidWeight", w, err)
		}
	}
	if _, err := c.Semaphore("bad", 0).Acquire(ctx, 1); !errors.Is(err, locker.ErrInvalidWeight) {
		t.Errorf("Acquire on a Semaphore of size 0: %v; want ErrInvalidWeight", err)
	}
}

// TestSemaphoreLoss checks that permits are leases: a hold the backend
// drops ends as lost and gives its place back.
func TestSemaphoreLoss(t *testing.T) {
	b := memdriver.NewBackend()
	c := locker.New(b.Driver(), locker.WithTTL(300*time.Millisecond), locker.WithErrorHandler(func(error) {}))
	defer c.Close(context.Background())
	ctx := context.Background()
	h, err := c.Semaphore("pool", 1).Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	b.Expire("pool")
	select {
	case <-h.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a permit whose lease the backend dropped is still held")
	}
	if !errors.Is(h.Err(), locker.ErrLost) {
		t.Errorf("Err of a dropped permit = %v; want ErrLost", h.Err())
	}
	h2, err := c.Semaphore("pool", 1).Acquire(ctx, 1)
	if err != nil {
		t.Fatalf("Acquire after the loss: %v", err)
	}
	if h2.Token() <= h.Token() {
		t.Errorf("token after the loss %d, not above %d", h2.Token(), h.Token())
	}
	h2.Release(ctx)
}

func TestMultiHoldLoss(t *testing.T) {
	b := memdriver.NewBackend()
	c := locker.New(b.Driver(), locker.WithTTL(300*time.Millisecond), locker.WithErrorHandler(func(error) {}))
	defer c.Close(context.Background())
	ctx := context.Background()
	mh, err := c.MultiLock([]string{"b", "a", "c", "a"}).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(mh.Holds()); n != 3 {
		t.Fatalf("MultiHold has %d parts; want 3 (repeated keys count once)", n)
	}
	b.Expire("b")
	select {
	case <-mh.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("MultiHold.Done still open after a part was lost")
	}
	if err := mh.Err(); !errors.Is(err, locker.ErrLost) || !strings.Contains(err.Error(), `"b"`) {
		t.Errorf("MultiHold.Err = %v; want the loss of part \"b\"", err)
	}
	if !errors.Is(context.Cause(mh.Context()), locker.ErrLost) {
		t.Errorf("cause of MultiHold.Context = %v; want ErrLost", context.Cause(mh.Context()))
	}
	err = mh.Release(ctx)
	if !errors.Is(err, locker.ErrLost) {
		t.Errorf("MultiHold.Release after a loss = %v; want the loss", err)
	}
	for _, k := range []string{"a", "b", "c"} {
		m := c.Mutex(k)
		if ok, err := m.TryLockContext(ctx); !ok || err != nil {
			t.Errorf("key %q after MultiHold.Release: TryLock = %v, %v; want it free", k, ok, err)
		} else {
			m.Unlock()
		}
	}
}

func TestMultiLockMisuse(t *testing.T) {
	c := locker.New(memdriver.New())
	defer c.Close(context.Background())
	if _, err := c.MultiLock(nil).Acquire(context.Background()); !errors.Is(err, locker.ErrInvalidKey) {
		t.Errorf("Acquire of a MultiLock without keys: %v; want ErrInvalidKey", err)
	}
	if _, err := c.MultiLock([]string{"a", ""}).Acquire(context.Background()); !errors.Is(err, locker.ErrInvalidKey) {
		t.Errorf("Acquire of a MultiLock with an empty key: %v; want ErrInvalidKey", err)
	}
	ml := c.MultiLock([]string{"a", "b"})
	if err := ml.UnlockContext(context.Background()); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("UnlockContext of an unlocked MultiLock: %v; want ErrNotHeld", err)
	}
	ml.Lock()
	ml.Unlock()
	defer func() {
		if recover() == nil {
			t.Errorf("Unlock of an unlocked MultiLock did not panic")
		}
	}()
	ml.Unlock()
}

func TestElectionObserveEndsWithClose(t *testing.T) {
	c := locker.New(memdriver.New())
	e := c.Election("e")
	if _, err := e.Campaign(context.Background(), strings.Repeat("x", driver.MaxValueLen+1)); !errors.Is(err, locker.ErrInvalidValue) {
		t.Errorf("Campaign with a value over MaxValueLen: %v; want ErrInvalidValue", err)
	}
	ch, err := e.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if l := <-ch; l != (locker.Leader{}) {
		t.Errorf("first Observe report without a leader = %+v; want the zero Leader", l)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for range ch {
	}
	if _, err := e.Observe(context.Background()); !errors.Is(err, locker.ErrClosed) {
		t.Errorf("Observe after Close: %v; want ErrClosed", err)
	}
}
