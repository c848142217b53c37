//go:build go1.25

package memdriver_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
)

func TestCapabilities(t *testing.T) {
	d := memdriver.New()
	want := driver.Capabilities{
		Shared: true, Counted: true, Values: true,
		MinTTL: time.Millisecond, MaxTTL: 365 * 24 * time.Hour,
		Queue: true, TokenFloor: true,
		Notify: true, Acquire: true, WatchLoss: true, RefreshBatch: true, Inspect: true,
	}
	if got := driver.CapabilitiesOf(d); got != want {
		t.Errorf("Capabilities() = %+v, want %+v", got, want)
	}
	b := d.Backend()
	if b == nil {
		t.Fatal("Backend() = nil")
	}
	if b.Holders("unknown") != nil || b.Queued("unknown") != nil {
		t.Error("unknown key has holders or waiters")
	}
}

func TestAcquireGrantsFirstTokenOne(t *testing.T) {
	d := memdriver.New()
	r := rq("k", "a", ex, time.Second)
	l := mustAcquire(t, d, r)
	if l.Token != 1 {
		t.Errorf("first token = %d, want 1", l.Token)
	}
	want := []driver.Lease{{Key: "k", Owner: "a", Mode: ex, Token: 1, TTL: time.Second}}
	if got := d.Backend().Holders("k"); !slices.Equal(got, want) {
		t.Errorf("Holders = %+v, want %+v", got, want)
	}
}

func TestExclusiveConflict(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		ctx := context.Background()
		mustAcquire(t, d, rq("k", "a", ex, 10*time.Second))
		time.Sleep(3 * time.Second)
		_, err := d.TryAcquire(ctx, rq("k", "b", ex, time.Second))
		wantLocked(t, err, 7*time.Second)
		_, err = d.TryAcquire(ctx, rq("k", "b", sh, time.Second))
		wantLocked(t, err, 7*time.Second)
		if got := owners(d.Backend(), "k"); !slices.Equal(got, []string{"a"}) {
			t.Errorf("holders = %v", got)
		}
	})
}

func TestIdempotentReacquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		l1 := mustAcquire(t, d, rq("k", "a", ex, 2*time.Second))
		time.Sleep(time.Second)
		l2 := mustAcquire(t, d, rq("k", "a", ex, 5*time.Second))
		if l2.Token != l1.Token {
			t.Fatalf("re-acquire token = %d, want %d", l2.Token, l1.Token)
		}
		if l2.TTL != 5*time.Second {
			t.Errorf("re-acquire TTL = %v", l2.TTL)
		}
		// The hold now lasts 5s from the re-acquire, not 2s from the first.
		time.Sleep(4 * time.Second)
		_, err := d.TryAcquire(context.Background(), rq("k", "b", ex, time.Second))
		wantLocked(t, err, time.Second)
		time.Sleep(time.Second)
		if got := d.Backend().Holders("k"); got != nil {
			t.Errorf("Holders after expiry = %+v", got)
		}
	})
}

func TestSameOwnerOtherMode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		ctx := context.Background()
		l := mustAcquire(t, d, rq("k", "a", sh, 4*time.Second))
		time.Sleep(time.Second)
		_, err := d.TryAcquire(ctx, rq("k", "a", ex, 10*time.Second))
		wantLocked(t, err, 3*time.Second)
		_, err = tryQueued(d, ctx, rq("k", "a", ex, 10*time.Second))
		wantLocked(t, err, 3*time.Second)
		if q := d.Backend().Queued("k"); q != nil {
			t.Errorf("Queued = %v, want none", q)
		}
		want := []driver.Lease{l}
		if got := d.Backend().Holders("k"); !slices.Equal(got, want) {
			t.Errorf("Holders = %+v, want %+v", got, want)
		}
	})
}

func TestShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		ctx := context.Background()
		la := mustAcquire(t, d, rq("k", "a", sh, 5*time.Second))
		lb := mustAcquire(t, d, rq("k", "b", sh, 2*time.Second))
		if la.Token != 1 || lb.Token != 2 {
			t.Errorf("shared tokens = %d, %d; want 1, 2", la.Token, lb.Token)
		}
		if lb2 := mustAcquire(t, d, rq("k", "b", sh, 2*time.Second)); lb2.Token != lb.Token {
			t.Errorf("shared re-acquire token = %d, want %d", lb2.Token, lb.Token)
		}
		// Exclusive waits for the last shared hold.
		_, err := d.TryAcquire(ctx, rq("k", "x", ex, time.Second))
		wantLocked(t, err, 5*time.Second)
		if err := d.Release(ctx, la); err != nil {
			t.Fatal(err)
		}
		_, err = d.TryAcquire(ctx, rq("k", "x", ex, time.Second))
		wantLocked(t, err, 2*time.Second)
		time.Sleep(2 * time.Second)
		lx := mustAcquire(t, d, rq("k", "x", ex, time.Second))
		if lx.Token != 3 {
			t.Errorf("exclusive token = %d, want 3", lx.Token)
		}
		// Shared waits for the exclusive hold.
		_, err = d.TryAcquire(ctx, rq("k", "c", sh, time.Second))
		wantLocked(t, err, time.Second)
	})
}

func TestRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		ctx := context.Background()
		l := mustAcquire(t, d, rq("k", "a", ex, 2*time.Second))
		time.Sleep(time.Second)
		l.TTL = 3 * time.Second
		got, err := d.Refresh(ctx, l)
		if err != nil {
			t.Fatal(err)
		}
		if got != l {
			t.Errorf("Refresh = %+v, want %+v", got, l)
		}
		time.Sleep(2 * time.Second) // past the original expiry
		_, err = d.TryAcquire(ctx, rq("k", "b", ex, time.Second))
		wantLocked(t, err, time.Second)
		// Token 0 is no grant's token.
		l0 := l
		l0.Token = 0
		if _, err := d.Refresh(ctx, l0); !errors.Is(err, driver.ErrNotHeld) {
			t.Errorf("Refresh(token 0) = %v; want ErrNotHeld", err)
		}
	})
}

func TestRefreshNotHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		b := d.Backend()
		ctx := context.Background()
		l := mustAcquire(t, d, rq("k", "a", ex, time.Second))

		for name, bad := range map[string]driver.Lease{
			"other owner": {Key: "k", Owner: "b", Mode: ex, Token: l.Token, TTL: time.Second},
			"other mode":  {Key: "k", Owner: "a", Mode: sh, Token: l.Token, TTL: time.Second},
			"stale token": {Key: "k", Owner: "a", Mode: ex, Token: l.Token + 1, TTL: time.Second},
			"other key":   {Key: "k2", Owner: "a", Mode: ex, Token: l.Token, TTL: time.Second},
			"key prefix":  {Key: "", Owner: "a", Mode: ex, Token: l.Token, TTL: time.Second},
			"longer key":  {Key: "k/", Owner: "a", Mode: ex, Token: l.Token, TTL: time.Second},
		} {
			_, err := d.Refresh(ctx, bad)
			if !errors.Is(err, driver.ErrNotHeld) {
				t.Errorf("%s: err = %v, want ErrNotHeld", name, err)
			}
		}
		if got := b.Holders("k"); !slices.Equal(got, []driver.Lease{l}) {
			t.Fatalf("Holders = %+v", got)
		}

		// An expired hold is never re-created.
		time.Sleep(time.Second)
		_, err := d.Refresh(ctx, l)
		wantNotHeld(t, err)
		if got := b.Holders("k"); got != nil {
			t.Errorf("Holders after refresh of expired lease = %+v", got)
		}
		// Nor is a released one.
		l = mustAcquire(t, d, rq("k", "a", ex, time.Second))
		if err := d.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
		_, err = d.Refresh(ctx, l)
		wantNotHeld(t, err)
		if got := b.Holders("k"); got != nil {
			t.Errorf("Holders after refresh of released lease = %+v", got)
		}
	})
}

func TestRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		b := d.Backend()
		ctx := context.Background()
		l := mustAcquire(t, d, rq("k", "a", ex, time.Second))
		for _, bad := range []driver.Lease{
			{Key: "k", Owner: "b", Mode: ex},
			{Key: "k", Owner: "a", Mode: sh},
			{Key: "k", Owner: "a", Mode: ex, Token: l.Token + 1},
			{Key: "never", Owner: "a", Mode: ex},
		} {
			wantNotHeld(t, d.Release(ctx, bad))
		}
		if got := b.Holders("k"); !slices.Equal(got, []driver.Lease{l}) {
			t.Fatalf("Holders = %+v", got)
		}
		if err := d.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
		wantNotHeld(t, d.Release(ctx, l))
		if got := b.Holders("k"); got != nil {
			t.Errorf("Holders after release = %+v", got)
		}
		// An abandoned release releases the owner's hold, whatever its
		// token; without Abandoned, token 0 is no grant's token.
		l = mustAcquire(t, d, rq("k", "a", ex, time.Second))
		wantNotHeld(t, d.Release(ctx, driver.Lease{Key: "k", Owner: "a", Mode: ex}))
		if err := d.Release(ctx, driver.Lease{Key: "k", Owner: "a", Mode: ex, Abandoned: true}); err != nil {
			t.Fatal(err)
		}
		// An expired hold is not held.
		l = mustAcquire(t, d, rq("k", "a", ex, time.Second))
		time.Sleep(time.Second)
		wantNotHeld(t, d.Release(ctx, l))
	})
}

func TestReleaseSharedLeavesOthers(t *testing.T) {
	d := memdriver.New()
	la := mustAcquire(t, d, rq("k", "a", sh, time.Minute))
	mustAcquire(t, d, rq("k", "b", sh, time.Minute))
	if err := d.Release(context.Background(), la); err != nil {
		t.Fatal(err)
	}
	if got := owners(d.Backend(), "k"); !slices.Equal(got, []string{"b"}) {
		t.Errorf("holders = %v, want [b]", got)
	}
}

func TestExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		mustAcquire(t, d, rq("k", "a", ex, time.Second))
		time.Sleep(time.Second - time.Nanosecond)
		_, err := d.TryAcquire(context.Background(), rq("k", "b", ex, time.Second))
		wantLocked(t, err, time.Nanosecond)
		time.Sleep(time.Nanosecond)
		if l := mustAcquire(t, d, rq("k", "b", ex, time.Second)); l.Token != 2 {
			t.Errorf("token after expiry = %d, want 2", l.Token)
		}
	})
}

func TestBackendExpire(t *testing.T) {
	d := memdriver.New()
	b := d.Backend()
	ctx := context.Background()
	b.Expire("unknown") // no-op
	la := mustAcquire(t, d, rq("k", "a", sh, time.Hour))
	mustAcquire(t, d, rq("k", "b", sh, time.Hour))
	mustAcquire(t, d, rq("other", "a", ex, time.Hour))
	sub, err := d.Subscribe(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	b.Expire("k")
	if !woken(sub) {
		t.Error("Expire did not wake the subscriber")
	}
	if got := b.Holders("k"); got != nil {
		t.Errorf("Holders after Expire = %+v", got)
	}
	if got := owners(b, "other"); !slices.Equal(got, []string{"a"}) {
		t.Errorf("Expire touched another key: holders = %v", got)
	}
	_, err = d.Refresh(ctx, la)
	wantNotHeld(t, err)
	if l := mustAcquire(t, d, rq("k", "c", ex, time.Hour)); l.Token != 3 {
		t.Errorf("token after Expire = %d, want 3", l.Token)
	}
}

func TestTokensStrictlyIncrease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		d1, d2 := b.Driver(), b.Driver()
		ctx := context.Background()
		var last uint64
		check := func(l driver.Lease) {
			t.Helper()
			if l.Token <= last {
				t.Fatalf("token %d after %d", l.Token, last)
			}
			last = l.Token
		}
		// Release.
		l := mustAcquire(t, d1, rq("k", "a", ex, time.Second))
		check(l)
		if err := d1.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
		// Same owner again, after release: a new token.
		l = mustAcquire(t, d1, rq("k", "a", ex, time.Second))
		check(l)
		// Expiry.
		time.Sleep(time.Second)
		l = mustAcquire(t, d2, rq("k", "b", ex, time.Second))
		check(l)
		// Expire.
		b.Expire("k")
		l = mustAcquire(t, d2, rq("k", "c", sh, time.Second))
		check(l)
		l = mustAcquire(t, d1, rq("k", "d", sh, time.Second))
		check(l)
		// Queue.
		_, err := tryQueued(d1, ctx, rq("k", "e", ex, time.Minute))
		wantLocked(t, err, time.Second)
		time.Sleep(time.Second)
		l = mustAcquireQueued(t, d1, rq("k", "e", ex, time.Second))
		check(l)
		// Tokens are per key.
		if l := mustAcquire(t, d1, rq("k2", "a", ex, time.Second)); l.Token != 1 {
			t.Errorf("first token of another key = %d", l.Token)
		}
	})
}

func TestKeysAreIndependent(t *testing.T) {
	d := memdriver.New()
	keys := []string{"a", "a/b", "a.b", "a\x01", "ab", "A", "a ", "é"}
	for _, k := range keys {
		if l := mustAcquire(t, d, rq(k, "o", ex, time.Minute)); l.Token != 1 {
			t.Errorf("token of %q = %d", k, l.Token)
		}
	}
	for _, k := range keys {
		if got := owners(d.Backend(), k); !slices.Equal(got, []string{"o"}) {
			t.Errorf("holders of %q = %v", k, got)
		}
	}
}

func TestBackendsAreIndependent(t *testing.T) {
	d1, d2 := memdriver.New(), memdriver.New()
	mustAcquire(t, d1, rq("k", "a", ex, time.Minute))
	if l := mustAcquire(t, d2, rq("k", "b", ex, time.Minute)); l.Token != 1 {
		t.Errorf("token on second backend = %d", l.Token)
	}
}

func TestDriversShareBackend(t *testing.T) {
	b := memdriver.NewBackend()
	d1, d2 := b.Driver(), b.Driver()
	if d1 == d2 || d1.Backend() != b || d2.Backend() != b {
		t.Fatal("Driver() must return distinct clients of b")
	}
	l := mustAcquire(t, d1, rq("k", "a", ex, time.Minute))
	_, err := d2.TryAcquire(context.Background(), rq("k", "b", ex, time.Minute))
	wantLocked(t, err, -1)
	// Another client may release on behalf of the owner (the owner is
	// the identity, not the connection).
	if err := d2.Release(context.Background(), l); err != nil {
		t.Fatal(err)
	}
}

func TestErrorsNameKey(t *testing.T) {
	d := memdriver.New()
	err := d.Release(context.Background(), driver.Lease{Key: "my/key", Owner: "a"})
	const want = `memdriver: release "my/key": lease not held`
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
}

func TestRefreshBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := memdriver.New()
		b := d.Backend()
		ctx := context.Background()
		if errs := d.RefreshBatch(ctx, nil); len(errs) != 0 {
			t.Errorf("RefreshBatch(nil) = %v", errs)
		}
		l1 := mustAcquire(t, d, rq("k1", "a", ex, time.Second))
		l2 := mustAcquire(t, d, rq("k2", "a", sh, time.Second))
		l3 := mustAcquire(t, d, rq("k3", "a", ex, time.Second))
		if err := d.Release(ctx, l3); err != nil {
			t.Fatal(err)
		}
		before := b.Stats()
		l1.TTL, l2.TTL = 5*time.Second, 5*time.Second
		bad := driver.Lease{Key: "k1", Owner: "z", Mode: ex, TTL: 5 * time.Second}
		errs := d.RefreshBatch(ctx, []driver.Lease{l1, l3, l2, bad})
		if len(errs) != 4 {
			t.Fatalf("len(errs) = %d", len(errs))
		}
		if errs[0] != nil || errs[2] != nil {
			t.Errorf("errs = %v", errs)
		}
		wantNotHeld(t, errs[1])
		wantNotHeld(t, errs[3])
		after := b.Stats()
		if after.RefreshBatch != before.RefreshBatch+1 || after.Total() != before.Total()+1 {
			t.Errorf("stats %+v -> %+v, want one RefreshBatch call", before, after)
		}
		time.Sleep(4 * time.Second)
		if got := owners(b, "k1"); !slices.Equal(got, []string{"a"}) {
			t.Errorf("k1 holders = %v", got)
		}
		if got := owners(b, "k2"); !slices.Equal(got, []string{"a"}) {
			t.Errorf("k2 holders = %v", got)
		}
		if got := b.Holders("k3"); got != nil {
			t.Errorf("k3 re-created: %+v", got)
		}
	})
}

func TestStats(t *testing.T) {
	d := memdriver.New()
	b := d.Backend()
	ctx := context.Background()
	l := mustAcquire(t, d, rq("k", "a", ex, time.Minute))
	_, _ = tryQueued(d, ctx, rq("k", "b", ex, time.Minute))
	_, _ = d.Refresh(ctx, l)
	_ = d.RefreshBatch(ctx, []driver.Lease{l, l})
	_ = d.Release(ctx, l)
	s, err := d.Subscribe(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	want := memdriver.Stats{TryAcquire: 1, TryAcquireQueued: 1, Refresh: 1, RefreshBatch: 1, Release: 1, Subscribe: 1}
	if got := b.Stats(); got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
	if got := b.Calls(); got != 6 {
		t.Errorf("Calls = %d, want 6", got)
	}
	// Inspection is not counted.
	b.Holders("k")
	b.Queued("k")
	b.Expire("k")
	if got := b.Calls(); got != 6 {
		t.Errorf("Calls after inspection = %d, want 6", got)
	}
}

// TestMutualExclusion hammers one key from several clients with the race
// detector watching, and checks that exclusive holds never overlap and
// shared ones never overlap an exclusive one.
func TestMutualExclusion(t *testing.T) {
	b := memdriver.NewBackend()
	ctx := context.Background()
	var readers, writers atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		d := b.Driver()
		mode := ex
		if i%2 == 1 {
			mode = sh
		}
		wg.Go(func() {
			owner := string(rune('a' + i))
			for n := 0; n < 200; {
				l, err := d.TryAcquire(ctx, rq("k", owner, mode, time.Minute))
				if err != nil {
					if !errors.Is(err, driver.ErrLocked) {
						t.Error(err)
						return
					}
					continue
				}
				n++
				if mode == ex {
					if w := writers.Add(1); w != 1 || readers.Load() != 0 {
						t.Errorf("exclusive overlap: writers %d readers %d", w, readers.Load())
					}
					writers.Add(-1)
				} else {
					readers.Add(1)
					if writers.Load() != 0 {
						t.Error("shared hold overlaps an exclusive one")
					}
					readers.Add(-1)
				}
				if err := d.Release(ctx, l); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := b.Holders("k"); got != nil {
		t.Errorf("left held: %+v", got)
	}
}
