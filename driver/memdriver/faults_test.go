//go:build go1.25

package memdriver_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
)

// calls makes one call of each kind subject to the fault hooks and returns
// their errors.
func calls(ctx context.Context, d *memdriver.Driver, l driver.Lease) map[string]error {
	errs := map[string]error{}
	_, errs["TryAcquire"] = d.TryAcquire(ctx, rq("k", "x", ex, time.Minute))
	_, errs["TryAcquireQueued"] = tryQueued(d, ctx, rq("k", "y", ex, time.Minute))
	_, errs["Refresh"] = d.Refresh(ctx, l)
	errs["RefreshBatch"] = d.RefreshBatch(ctx, []driver.Lease{l})[0]
	errs["Release"] = d.Release(ctx, driver.Lease{Key: "k", Owner: "nobody"})
	s, err := d.Subscribe(ctx, "k")
	if err == nil {
		s.Close()
	}
	errs["Subscribe"] = err
	return errs
}

func TestFailNext(t *testing.T) {
	d := memdriver.New()
	b := d.Backend()
	ctx := context.Background()
	l := mustAcquire(t, d, rq("k", "a", ex, time.Minute))
	before := b.Stats()

	d.FailNext(6, nil)
	for op, err := range calls(ctx, d, l) {
		if !errors.Is(err, memdriver.ErrInjected) {
			t.Errorf("%s: err = %v, want ErrInjected", op, err)
		}
	}
	if got := b.Stats(); got != before {
		t.Errorf("failed calls reached the backend: %+v -> %+v", before, got)
	}
	if got := b.Queued("k"); got != nil {
		t.Errorf("failed TryAcquireQueued queued: %v", got)
	}
	if got := b.Holders("k"); !slices.Equal(got, []driver.Lease{l}) {
		t.Errorf("Holders = %+v", got)
	}
	// The failures are used up.
	if _, err := d.Refresh(ctx, l); err != nil {
		t.Errorf("Refresh after the failures: %v", err)
	}
}

func TestFailNextCustomError(t *testing.T) {
	d := memdriver.New()
	ctx := context.Background()
	boom := errors.New("boom")
	d.FailNext(2, driver.Permanent(boom))
	for range 2 {
		_, err := d.TryAcquire(ctx, rq("k", "a", ex, time.Minute))
		if !errors.Is(err, boom) || !driver.IsPermanent(err) {
			t.Errorf("err = %v, want permanent boom", err)
		}
	}
	mustAcquire(t, d, rq("k", "a", ex, time.Minute))

	// FailNext replaces what is pending; n <= 0 cancels.
	d.FailNext(5, nil)
	d.FailNext(0, nil)
	mustAcquire(t, d, rq("k", "a", ex, time.Minute))
}

func TestFailNextBatchConsumesOne(t *testing.T) {
	d := memdriver.New()
	ctx := context.Background()
	l1 := mustAcquire(t, d, rq("k1", "a", ex, time.Minute))
	l2 := mustAcquire(t, d, rq("k2", "a", ex, time.Minute))
	d.FailNext(1, nil)
	errs := d.RefreshBatch(ctx, []driver.Lease{l1, l2})
	for i, err := range errs {
		if !errors.Is(err, memdriver.ErrInjected) {
			t.Errorf("errs[%d] = %v", i, err)
		}
	}
	if errs := d.RefreshBatch(ctx, []driver.Lease{l1, l2}); errs[0] != nil || errs[1] != nil {
		t.Errorf("second batch: %v", errs)
	}
}

func TestFailNextPerDriver(t *testing.T) {
	b := memdriver.NewBackend()
	d1, d2 := b.Driver(), b.Driver()
	d1.FailNext(1, nil)
	mustAcquire(t, d2, rq("k", "a", ex, time.Minute))
	if _, err := d1.TryAcquire(context.Background(), rq("k2", "a", ex, time.Minute)); !errors.Is(err, memdriver.ErrInjected) {
		t.Errorf("err = %v", err)
	}
}

func TestLoseReplies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		b := d.Backend()
		ctx := context.Background()

		l := checkLostAcquireApplied(t, d, b)
		checkLostRefreshesApplied(t, d, b, l)

		// Subscribe does not consume a lost reply.
		d.LoseReplies(1)
		s, err := d.Subscribe(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()

		// Release is applied.
		if err := d.Release(ctx, l); !errors.Is(err, memdriver.ErrReplyLost) {
			t.Fatalf("Release err = %v", err)
		}
		if got := b.Holders("k"); got != nil {
			t.Fatalf("release not applied: holders = %+v", got)
		}
		if !woken(s) {
			t.Error("applied release did not wake the subscriber")
		}
		wantNotHeld(t, d.Release(ctx, l))

		checkLostFailureReply(t, d, b)
	})
}

// checkLostAcquireApplied checks that a TryAcquire of "k" whose reply is
// lost is applied, and that a retry gets the same token; it returns the
// retry's lease.
func checkLostAcquireApplied(t *testing.T, d *memdriver.Driver, b *memdriver.Backend) driver.Lease {
	t.Helper()
	ctx := context.Background()
	d.LoseReplies(1)
	_, err := d.TryAcquire(ctx, rq("k", "a", ex, time.Second))
	if !errors.Is(err, memdriver.ErrReplyLost) {
		t.Fatalf("err = %v, want ErrReplyLost", err)
	}
	if driver.IsPermanent(err) {
		t.Error("a lost reply is not permanent")
	}
	if got := owners(b, "k"); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("holders = %v", got)
	}
	l := mustAcquire(t, d, rq("k", "a", ex, time.Second))
	if l.Token != 1 {
		t.Errorf("retry token = %d, want 1", l.Token)
	}
	return l
}

// checkLostRefreshesApplied checks that a Refresh of l, then a
// RefreshBatch of l and a lease of "k2", whose replies are lost are
// applied (the keys are still held a minute later), and that every lease
// of the batch gets the error.
func checkLostRefreshesApplied(t *testing.T, d *memdriver.Driver, b *memdriver.Backend, l driver.Lease) {
	t.Helper()
	ctx := context.Background()
	d.LoseReplies(1)
	l.TTL = time.Hour
	if _, err := d.Refresh(ctx, l); !errors.Is(err, memdriver.ErrReplyLost) {
		t.Fatalf("Refresh err = %v", err)
	}
	time.Sleep(time.Minute)
	if got := owners(b, "k"); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("refresh not applied: holders = %v", got)
	}

	// RefreshBatch is applied, and every lease gets the error.
	l2 := mustAcquire(t, d, rq("k2", "a", ex, time.Second))
	l2.TTL = time.Hour
	d.LoseReplies(1)
	for i, err := range d.RefreshBatch(ctx, []driver.Lease{l, l2}) {
		if !errors.Is(err, memdriver.ErrReplyLost) {
			t.Errorf("batch errs[%d] = %v", i, err)
		}
	}
	time.Sleep(time.Minute)
	if got := owners(b, "k2"); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("batch not applied: holders = %v", got)
	}
}

// checkLostFailureReply checks that a failed call's reply is lost too:
// the queued TryAcquire refused behind a holder of "k" returns only
// ErrReplyLost, and is queued.
func checkLostFailureReply(t *testing.T, d *memdriver.Driver, b *memdriver.Backend) {
	t.Helper()
	ctx := context.Background()
	mustAcquire(t, d, rq("k", "h", ex, time.Hour))
	d.LoseReplies(1)
	_, err := tryQueued(d, ctx, rq("k", "q", ex, time.Hour))
	if !errors.Is(err, memdriver.ErrReplyLost) || errors.Is(err, driver.ErrLocked) {
		t.Fatalf("err = %v, want ErrReplyLost only", err)
	}
	if got := b.Queued("k"); !slices.Equal(got, []string{"q"}) {
		t.Errorf("Queued = %v", got)
	}
}

func TestLoseRepliesAfterFailNext(t *testing.T) {
	d := memdriver.New()
	ctx := context.Background()
	d.FailNext(1, nil)
	d.LoseReplies(1)
	if _, err := d.TryAcquire(ctx, rq("k", "a", ex, time.Minute)); !errors.Is(err, memdriver.ErrInjected) {
		t.Fatalf("err = %v, want ErrInjected", err)
	}
	if got := d.Backend().Holders("k"); got != nil {
		t.Fatalf("failed call applied: %+v", got)
	}
	if _, err := d.TryAcquire(ctx, rq("k", "a", ex, time.Minute)); !errors.Is(err, memdriver.ErrReplyLost) {
		t.Fatalf("err = %v, want ErrReplyLost", err)
	}
	mustAcquire(t, d, rq("k", "a", ex, time.Minute))
	d.LoseReplies(3)
	d.LoseReplies(0)
	mustAcquire(t, d, rq("k", "a", ex, time.Minute))
}

func TestBlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		d, other := b.Driver(), b.Driver()
		ctx := context.Background()
		d.Block()
		d.Block() // no-op

		done := make(chan error, 1)
		go func() {
			_, err := d.TryAcquire(ctx, rq("k", "a", ex, time.Minute))
			done <- err
		}()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("blocked call returned %v", err)
		default:
		}
		if b.Calls() != 0 {
			t.Fatalf("blocked call reached the backend")
		}
		// Other clients are not affected.
		mustAcquire(t, other, rq("k2", "b", ex, time.Minute))

		// A blocked call gives up with its context.
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		start := time.Now()
		_, err := d.Refresh(tctx, driver.Lease{Key: "k", Owner: "a", TTL: time.Minute})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want DeadlineExceeded", err)
		}
		if waited := time.Since(start); waited != 5*time.Second {
			t.Errorf("waited %v", waited)
		}

		d.Unblock()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := owners(b, "k"); !slices.Equal(got, []string{"a"}) {
			t.Errorf("holders = %v", got)
		}
		d.Unblock() // no-op
		mustAcquire(t, d, rq("k3", "a", ex, time.Minute))
	})
}

func TestBlockAllCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		l := mustAcquire(t, d, rq("k", "a", ex, time.Hour))
		s, err := d.Subscribe(context.Background(), "k")
		if err != nil {
			t.Fatal(err)
		}
		d.Block()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		for op, err := range calls(ctx, d, l) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s: err = %v, want DeadlineExceeded", op, err)
			}
		}
		if got := d.Backend().Calls(); got != 2 {
			t.Errorf("Calls = %d, want 2", got)
		}
		// Block does not apply to queries, nor to Close.
		d.Capabilities()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		d.Unblock()
	})
}

func TestDoneContext(t *testing.T) {
	d := memdriver.New()
	b := d.Backend()
	l := mustAcquire(t, d, rq("k", "a", ex, time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d.FailNext(1, nil)
	d.LoseReplies(1)
	for op, err := range calls(ctx, d, l) {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s: err = %v, want Canceled", op, err)
		}
	}
	if got := b.Calls(); got != 1 {
		t.Errorf("Calls = %d, want 1", got)
	}
	if got := b.Queued("k"); got != nil {
		t.Errorf("Queued = %v", got)
	}
	// The pending faults were not consumed.
	if _, err := d.TryAcquire(context.Background(), rq("k2", "a", ex, time.Hour)); !errors.Is(err, memdriver.ErrInjected) {
		t.Errorf("err = %v, want ErrInjected", err)
	}
}
