//go:build go1.25

package locker_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
)

func TestLeaderLatch_Handoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		bg := context.Background()
		c1, c2 := locker.New(b.Driver(), locker.WithTTL(time.Second)), locker.New(b.Driver(), locker.WithTTL(time.Second))
		defer c1.Close(bg)
		defer c2.Close(bg)

		var log eventLog
		event := log.add
		ctx1, cancel1 := context.WithCancel(bg)
		defer cancel1()
		l1, err := c1.Election("e").Latch(ctx1, "one",
			locker.OnElected(func(*locker.Hold) { event("one elected") }),
			locker.OnOusted(func(err error) { event("one ousted: " + errString(err)) }))
		if err != nil {
			t.Fatal(err)
		}
		h1, err := l1.Await(bg)
		if err != nil || !l1.IsLeader() || l1.Leadership() != h1 {
			t.Fatalf("Await = %v, %v; IsLeader %v", h1, err, l1.IsLeader())
		}
		ctx2, cancel2 := context.WithCancel(bg)
		defer cancel2()
		l2, err := c2.Election("e").Latch(ctx2, "two",
			locker.OnElected(func(*locker.Hold) { event("two elected") }))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second) // the leader's lease is renewed meanwhile
		synctest.Wait()
		if l2.IsLeader() || l2.Leadership() != nil || !l1.IsLeader() {
			t.Fatalf("IsLeader: one %v, two %v; want true, false", l1.IsLeader(), l2.IsLeader())
		}
		if l, err := c2.Election("e").Leader(bg); err != nil || l.Value != "one" || l.Term != h1.Token() {
			t.Errorf("Leader = %+v, %v; want one's term %d", l, err, h1.Token())
		}

		cancel1()
		<-l1.Done()
		if l1.IsLeader() {
			t.Error("IsLeader true after the latch stopped")
		}
		if err := l1.Err(); !errors.Is(err, context.Canceled) {
			t.Errorf("Err = %v; want context.Canceled", err)
		}
		h2, err := l2.Await(bg)
		if err != nil || h2.Token() <= h1.Token() {
			t.Fatalf("second leader %v, %v; want a term above %d", h2, err, h1.Token())
		}
		synctest.Wait() // for OnElected, which runs after Await returns
		// One's OnOusted runs after its resignation reached the backend,
		// and two's OnElected in two's goroutine once two is elected: the
		// two can come in either order.
		got := log.String()
		if got != "one elected; one ousted: <nil>; two elected" && got != "one elected; two elected; one ousted: <nil>" {
			t.Errorf("events: %s; want one elected, then one ousted and two elected", got)
		}
		if _, err := l1.Await(bg); !errors.Is(err, context.Canceled) {
			t.Errorf("Await on a stopped latch: %v; want its error", err)
		}
	})
}

// eventLog records events from several goroutines.
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, s)
}

func (l *eventLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.events, "; ")
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// noWatch is a memdriver.Driver without driver.LossWatcher: its holders
// learn of a loss from the watchdog's next renewal.
type noWatch struct{ d *memdriver.Driver }

func (n noWatch) TryAcquire(ctx context.Context, r driver.Request) (driver.Lease, error) {
	return n.d.TryAcquire(ctx, r)
}
func (n noWatch) Refresh(ctx context.Context, l driver.Lease) (driver.Lease, error) {
	return n.d.Refresh(ctx, l)
}
func (n noWatch) Release(ctx context.Context, l driver.Lease) error { return n.d.Release(ctx, l) }

// Capabilities reports memdriver's, less the interfaces noWatch lacks.
func (n noWatch) Capabilities() driver.Capabilities {
	c := n.d.Capabilities()
	c.WatchLoss, c.Acquire, c.Notify, c.RefreshBatch = false, false, false, false
	return c
}
func (n noWatch) Inspect(ctx context.Context, key string) (driver.KeyState, error) {
	return n.d.Inspect(ctx, key)
}
func (n noWatch) ForceRelease(ctx context.Context, key string) (int, error) {
	return n.d.ForceRelease(ctx, key)
}

// TestLeaderLatch_Loss takes the leadership away on the backend: IsLeader
// turns false with the Hold's end, and the latch campaigns again; the loss
// is learnt from the backend (LossWatcher) or from the watchdog's next
// renewal.
func TestLeaderLatch_Loss(t *testing.T) {
	for _, tc := range []struct {
		name   string
		wrap   func(*memdriver.Driver) driver.Driver
		detect time.Duration // from the loss
	}{
		{"LossWatcher", func(d *memdriver.Driver) driver.Driver { return d }, 0},
		{"Watchdog", func(d *memdriver.Driver) driver.Driver { return noWatch{d} }, time.Second / 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { latchLoss(t, tc.wrap, tc.detect) })
		})
	}
}

func latchLoss(t *testing.T, wrap func(*memdriver.Driver) driver.Driver, detect time.Duration) {
	b := memdriver.NewBackend()
	bg := context.Background()
	c := locker.New(wrap(b.Driver()), locker.WithTTL(time.Second), locker.WithErrorHandler(func(error) {}))
	defer c.Close(bg)
	ousted := make(chan error, 1)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	l, err := c.Election("e").Latch(ctx, "v", locker.OnOusted(func(err error) { ousted <- err }))
	if err != nil {
		t.Fatal(err)
	}
	h1, err := l.Await(bg)
	if err != nil {
		t.Fatal(err)
	}
	lost := time.Now()
	b.Expire("e")
	<-h1.Done()
	if d := time.Since(lost); d > detect {
		t.Errorf("loss detected %v after it happened; want within %v", d, detect)
	}
	if l.IsLeader() && l.Leadership() == h1 {
		t.Fatal("IsLeader true by the lost Hold after its Done closed")
	}
	if err := <-ousted; !errors.Is(err, locker.ErrLost) {
		t.Errorf("OnOusted(%v); want ErrLost", err)
	}
	h2, err := l.Await(bg)
	if err != nil || h2.Token() <= h1.Token() {
		t.Fatalf("re-election %v, %v; want a term above %d", h2, err, h1.Token())
	}
}

func TestLeaderLatch_ClientClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		c := locker.New(b.Driver())
		l, err := c.Election("e").Latch(context.Background(), "v")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Await(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		select {
		case <-l.Done():
		default:
			t.Fatal("latch still running after Client.Close returned")
		}
		if err := l.Err(); !errors.Is(err, locker.ErrClosed) {
			t.Errorf("Err after Close = %v; want ErrClosed", err)
		}
		if len(b.Holders("e")) != 0 {
			t.Error("leadership still held after Close")
		}
		if _, err := c.Election("e").Latch(context.Background(), "v"); !errors.Is(err, locker.ErrClosed) {
			t.Errorf("Latch on a closed Client: %v; want ErrClosed", err)
		}
	})
}

func TestLeaderLatch_Unsupported(t *testing.T) {
	c := locker.New(onlyDriver{memdriver.NewBackend().Driver()})
	defer c.Close(context.Background())
	if _, err := c.Election("e").Latch(context.Background(), "v"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Latch on a driver without values: %v; want ErrUnsupported", err)
	}
	//lint:ignore SA1012 checking the nil-context error
	if _, err := c.Election("e").Latch(nil, "v"); !errors.Is(err, locker.ErrNilContext) { //nolint:staticcheck
		t.Errorf("Latch(nil ctx): %v; want ErrNilContext", err)
	}
}

// TestLeaderLatch_Errors: transient campaign errors are reported and
// retried; a closed backend client stops the latch with its permanent
// error; a bad key is refused at once.
func TestLeaderLatch_Errors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		d := b.Driver()
		var reported eventLog
		c := locker.New(d, locker.WithErrorHandler(func(err error) { reported.add(err.Error()) }))
		defer c.Close(context.Background())
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()

		d.FailNext(3, errors.New("connection reset"))
		l, err := c.Election("e").Latch(ctx, "v")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Await(ctx); err != nil {
			t.Fatalf("Await after 3 transient errors: %v", err)
		}
		if got := reported.String(); !strings.Contains(got, "connection reset") {
			t.Errorf("errors reported: %q; want the transient ones", got)
		}
		d.Close()
		<-l.Done()
		if err := l.Err(); !driver.IsPermanent(err) {
			t.Errorf("Err after the backend client closed = %v; want its permanent error", err)
		}

		if _, err := c.Election("").Latch(ctx, "v"); !errors.Is(err, locker.ErrInvalidKey) {
			t.Errorf("Latch with an empty key: %v; want ErrInvalidKey", err)
		}
	})
}
