//go:build go1.25

package locker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
)

// recorder is an Observer that keeps every event.
type recorder struct {
	mu      sync.Mutex
	events  []string
	ends    []locker.AcquireEnd
	renews  []locker.RenewalFailed
	holdEnd []locker.HoldEnd
}

func (r *recorder) observer() *locker.Observer {
	return &locker.Observer{
		AcquireStart: func(ctx context.Context, ev locker.AcquireStart) func(locker.AcquireEnd) {
			if ctx == nil {
				panic("nil ctx")
			}
			r.add(fmt.Sprintf("start %s %s", ev.Op, ev.Key))
			return func(e locker.AcquireEnd) {
				r.mu.Lock()
				r.ends = append(r.ends, e)
				r.mu.Unlock()
				r.add(fmt.Sprintf("end %s %s %v", e.Op, e.Key, e.Outcome))
			}
		},
		RenewalFailed: func(e locker.RenewalFailed) {
			r.mu.Lock()
			r.renews = append(r.renews, e)
			r.mu.Unlock()
			r.add("renewal-failed " + e.Key)
		},
		HoldEnd: func(e locker.HoldEnd) {
			r.mu.Lock()
			r.holdEnd = append(r.holdEnd, e)
			r.mu.Unlock()
			r.add(fmt.Sprintf("hold-end %s lost=%v", e.Key, e.Lost()))
		},
	}
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, s)
}

func (r *recorder) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

func wantEvents(t *testing.T, r *recorder, want ...string) {
	t.Helper()
	got := r.snapshot()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events:\n got %q\nwant %q", got, want)
	}
}

// TestObserver_GrantAndRelease: a lock call reports its start and its
// grant with the token and one attempt; the release reports the held time.
func TestObserver_GrantAndRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		c := locker.New(memdriver.New(), locker.WithObserver(r.observer()))
		defer c.Close(context.Background())
		h, err := c.Mutex("a").Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		if err := h.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		wantEvents(t, &r, "start lock a", "end lock a granted", "hold-end a lost=false")
		e := r.ends[0]
		if e.Token != h.Token() || e.Token == 0 || e.Attempts != 1 || e.Err != nil || e.Mode != driver.Exclusive || e.Try {
			t.Errorf("AcquireEnd = %+v, hold token %d", e, h.Token())
		}
		he := r.holdEnd[0]
		if he.Err != nil || he.Token != h.Token() || he.Held != 3*time.Second {
			t.Errorf("HoldEnd = %+v, want Held 3s and no error", he)
		}
	})
}

// TestObserver_Outcomes: busy tries, cancelled waits, bad keys and a
// closed Client each have their outcome; waits count their attempts.
func TestObserver_Outcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		b := memdriver.NewBackend()
		other := locker.NewMutex(b.Driver(), "busy") // another process
		other.Lock()
		defer other.Unlock()
		c := locker.New(b.Driver(), locker.WithObserver(r.observer()), locker.WithBackoff(100*time.Millisecond, 100*time.Millisecond))

		if c.Mutex("busy").TryLock() {
			t.Fatal("TryLock of a held key succeeded")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := c.Mutex("busy").LockContext(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("LockContext = %v", err)
		}
		if err := c.Mutex("").LockContext(context.Background()); !errors.Is(err, locker.ErrInvalidKey) {
			t.Fatalf("LockContext(\"\") = %v", err)
		}
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := c.Mutex("x").LockContext(context.Background()); !errors.Is(err, locker.ErrClosed) {
			t.Fatalf("LockContext after Close = %v", err)
		}
		wantEvents(t, &r,
			"start trylock busy", "end trylock busy busy",
			"start lock busy", "end lock busy canceled",
			"start lock ", "end lock  error",
			"start lock x", "end lock x closed")
		if e := r.ends[0]; !e.Try || e.Attempts != 1 || e.Err != nil {
			t.Errorf("busy try: %+v", e)
		}
		// The memdriver notifies waiters: the wait is an attempt, a
		// subscription and a second attempt, then a wait for the news.
		if e := r.ends[1]; e.Wait != 2*time.Second || e.Attempts != 2 || !errors.Is(e.Err, context.DeadlineExceeded) {
			t.Errorf("cancelled wait: wait %v, attempts %d, err %v", e.Wait, e.Attempts, e.Err)
		}
		if e := r.ends[2]; e.Attempts != 0 || !errors.Is(e.Err, locker.ErrInvalidKey) {
			t.Errorf("bad key: %+v", e)
		}
	})
}

// TestObserver_RenewalFailedThenLost: a failed renewal is reported and the
// hold goes on; a lease the backend drops ends the hold as lost, with the
// reason; Close ends the others as closed.
func TestObserver_RenewalFailedThenLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		b := memdriver.NewBackend()
		d := b.Driver()
		c := locker.New(d, locker.WithObserver(r.observer()), locker.WithTTL(3*time.Second),
			locker.WithErrorHandler(func(error) {}))
		h, err := c.Mutex("a").Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		h2, err := c.RWMutex("b").RAcquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		boom := errors.New("boom")
		d.FailNext(1, boom)
		time.Sleep(1100 * time.Millisecond) // past the first renewal (TTL/3)
		synctest.Wait()
		if err := h.Err(); err != nil {
			t.Fatalf("hold ended after one failed renewal: %v", err)
		}
		r.mu.Lock()
		renews := append([]locker.RenewalFailed(nil), r.renews...)
		r.mu.Unlock()
		// The two renewals go out as one batch, which fails as a whole.
		if len(renews) != 2 || !errors.Is(renews[0].Err, boom) || renews[0].Token == 0 || renews[0].Key == renews[1].Key {
			t.Fatalf("RenewalFailed events = %+v", renews)
		}
		b.Expire("a")
		time.Sleep(2 * time.Second) // the next renewal finds the lease gone
		synctest.Wait()
		if !errors.Is(h.Err(), locker.ErrLost) {
			t.Fatalf("hold not lost: %v", h.Err())
		}
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		var lost, closed *locker.HoldEnd
		for i, e := range r.holdEnd {
			switch e.Key {
			case "a":
				lost = &r.holdEnd[i]
			case "b":
				closed = &r.holdEnd[i]
			}
		}
		if lost == nil || !lost.Lost() || !errors.Is(lost.Err, driver.ErrNotHeld) || lost.Token != h.Token() {
			t.Errorf("HoldEnd of the lost hold = %+v", lost)
		}
		if closed == nil || closed.Lost() || !errors.Is(closed.Err, locker.ErrClosed) || closed.Mode != driver.Shared || closed.Token != h2.Token() {
			t.Errorf("HoldEnd of the closed hold = %+v", closed)
		}
		if len(r.holdEnd) != 2 {
			t.Errorf("%d HoldEnd events, want 2", len(r.holdEnd))
		}
	})
}

// TestObserver_None: a Client without an Observer, or with an empty one,
// locks as usual.
func TestObserver_None(t *testing.T) {
	for _, o := range []*locker.Observer{nil, {}} {
		c := locker.New(memdriver.New(), locker.WithObserver(o))
		m := c.Mutex("a")
		m.Lock()
		m.Unlock()
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestObserver_HoldEndBeforeDone: HoldEnd is called before the hold's
// Done closes and its Context is cancelled, so that whoever waits for
// them finds the end recorded (otel's TestMetrics read the metrics after
// Done and sometimes found no end: the observer ran after Done closed).
func TestObserver_HoldEndBeforeDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		var mu sync.Mutex
		ended := map[string]bool{}
		c := locker.New(b.Driver(), locker.WithErrorHandler(func(error) {}), locker.WithObserver(&locker.Observer{
			HoldEnd: func(e locker.HoldEnd) {
				time.Sleep(10 * time.Millisecond) // a slow observer
				mu.Lock()
				ended[e.Key] = true
				mu.Unlock()
			},
		}))
		defer c.Close(context.Background())
		check := func(key string, wait <-chan struct{}, end func()) {
			t.Helper()
			go end()
			<-wait
			mu.Lock()
			defer mu.Unlock()
			if !ended[key] {
				t.Errorf("%s: the hold's end was seen before its HoldEnd was observed", key)
			}
		}
		lost, err := c.Mutex("lost").Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		check("lost", lost.Done(), func() { b.Expire("lost") })
		released, err := c.Mutex("released").Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		check("released", released.Context().Done(), func() { released.Release(context.Background()) })
	})
}
