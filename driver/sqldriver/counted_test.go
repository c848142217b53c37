package sqldriver_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
)

// counted returns a counted Shared request for weight of limit units.
func counted(key string, limit, weight int64, ttl time.Duration) driver.Request {
	r := req(key, driver.Shared, ttl)
	r.Limit, r.Weight = limit, weight
	return r
}

// TestCountedFIFO checks that a large request in the wait queue is not
// overtaken by small ones: with 2 of 4 units held, a queued request for 3
// keeps newcomers for 1 out, whether they queue or not, although they
// would fit; once the 2 units are released it is served, the next one
// for 1 fits beside it, and a later one for 2 waits. A counted refusal
// reports the time until the first hold or entry in its way may expire;
// an exclusive one, until the last.
func TestCountedFIFO(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const limit = 4
		ctx := ctxT(t)
		d := b.driver(t, nil)
		q := d
		key := uniqueKey(t, "sem")
		a := mustAcquire(t, d, counted(key, limit, 2, time.Minute))
		big := counted(key, limit, 3, 20*time.Second)
		if _, err := tryQueued(q, ctx, big); !errors.Is(err, driver.ErrLocked) {
			t.Fatalf("weight 3 beside 2 of 4: %v; want ErrLocked", err)
		}
		small := counted(key, limit, 1, time.Minute)
		_, err := d.TryAcquire(ctx, small)
		var le *driver.LockedError
		if !errors.As(err, &le) {
			t.Fatalf("weight 1 behind a queued weight 3: %v; want a LockedError", err)
		}
		// In the way: a's hold (a minute) and big's entry (20s): the first
		// may expire within 20s.
		if le.Remaining <= 0 || le.Remaining > 20*time.Second {
			t.Errorf("counted refusal: Remaining %v; want in (0, 20s], big's entry", le.Remaining)
		}
		for range 3 {
			if _, err := tryQueued(q, ctx, small); !errors.Is(err, driver.ErrLocked) {
				t.Fatalf("queued weight 1 behind a queued weight 3: %v; want ErrLocked", err)
			}
		}
		later := counted(key, limit, 2, time.Minute)
		if _, err := tryQueued(q, ctx, later); !errors.Is(err, driver.ErrLocked) {
			t.Fatalf("weight 2 behind 3 and 1: %v; want ErrLocked", err)
		}
		st, err := d.(driver.Inspector).Inspect(ctx, key)
		if err != nil || st.Waiting != 3 || len(st.Holders) != 1 || st.Holders[0].Weight != 2 || st.Limit != limit {
			t.Fatalf("Inspect: %+v, %v; want one holder of weight 2, limit %d, 3 waiting", st, err, limit)
		}
		// An exclusive newcomer waits for the last of them.
		_, err = d.TryAcquire(ctx, req(key, driver.Exclusive, time.Minute))
		if !errors.As(err, &le) || le.Remaining <= 30*time.Second {
			t.Errorf("exclusive refusal: %v; want a LockedError with Remaining over 30s (a's minute)", err)
		}
		if err := d.Release(ctx, a); err != nil {
			t.Fatal(err)
		}
		checkServedInQueueOrder(t, ctx, d, a, big, small, later)
	})
}

// checkServedInQueueOrder checks, once a's 2 units of 4 are released, that
// the queue's head big (weight 3) is served first, small (1) fits beside
// it, and later (2) waits until both are released; tokens grow from a's.
func checkServedInQueueOrder(t *testing.T, ctx context.Context, d driver.Driver, a driver.Lease, big, small, later driver.Request) {
	t.Helper()
	q := d
	if _, err := tryQueued(q, ctx, later); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("weight 2 behind 3 and 1 on a free key: %v; want ErrLocked", err)
	}
	lb, err := tryQueued(q, ctx, big)
	if err != nil {
		t.Fatalf("queue's head, weight 3 on a free key: %v", err)
	}
	ls, err := tryQueued(q, ctx, small)
	if err != nil {
		t.Fatalf("weight 1 beside 3 of 4: %v", err)
	}
	if ls.Token <= lb.Token || lb.Token <= a.Token {
		t.Errorf("tokens %d, %d, %d; want increasing", a.Token, lb.Token, ls.Token)
	}
	if _, err := tryQueued(q, ctx, later); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("weight 2 beside 4 of 4: %v; want ErrLocked", err)
	}
	for _, l := range []driver.Lease{lb, ls} {
		if err := d.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	ll, err := tryQueued(q, ctx, later)
	if err != nil {
		t.Fatalf("weight 2 on a free key: %v", err)
	}
	if err := d.Release(ctx, ll); err != nil {
		t.Fatal(err)
	}
}

// TestCountedLimitMismatch checks that every shared holder and shared
// waiter of a key must agree on its limit: a request with another limit
// (0 for an uncounted shared one) is refused with a *driver.LimitError
// carrying theirs, never granted, while an exclusive request only waits.
// A holder's re-acquire keeps its weight, value and token.
func TestCountedLimitMismatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		d := b.driver(t, nil)
		q := d
		in := d.(driver.Inspector)
		mismatch := func(what string, r driver.Request, queued bool, theirs int64) {
			t.Helper()
			var err error
			if queued {
				_, err = tryQueued(q, ctx, r)
			} else {
				_, err = d.TryAcquire(ctx, r)
			}
			var le *driver.LimitError
			if !errors.As(err, &le) || le.Limit != theirs || !errors.Is(err, driver.ErrLimitMismatch) ||
				errors.Is(err, driver.ErrLocked) || driver.IsPermanent(err) {
				t.Errorf("%s: %v; want a LimitError with their limit %d", what, err, theirs)
			}
		}

		key := uniqueKey(t, "sem")
		r := counted(key, 4, 2, time.Minute)
		r.Value = "first"
		l := mustAcquire(t, d, r)
		mismatch("limit 5 on a key of 4", counted(key, 5, 1, time.Minute), false, 4)
		mismatch("queued limit 5 on a key of 4", counted(key, 5, 1, time.Minute), true, 4)
		mismatch("uncounted shared on a key of 4", req(key, driver.Shared, time.Minute), false, 4)
		if _, err := d.TryAcquire(ctx, req(key, driver.Exclusive, time.Minute)); !errors.Is(err, driver.ErrLocked) {
			t.Errorf("exclusive on a counted key: %v; want ErrLocked", err)
		}
		checkReacquireKeeps(t, d, r, l)
		if err := d.Release(ctx, l); err != nil {
			t.Fatal(err)
		}

		// Uncounted shared holders have limit 0.
		key = uniqueKey(t, "rw")
		l = mustAcquire(t, d, req(key, driver.Shared, time.Minute))
		mismatch("counted on an uncounted shared key", counted(key, 4, 1, time.Minute), false, 0)
		if err := d.Release(ctx, l); err != nil {
			t.Fatal(err)
		}

		// A shared queue entry's limit counts too; an exclusive holder has
		// none.
		key = uniqueKey(t, "queue")
		lx := mustAcquire(t, d, req(key, driver.Exclusive, time.Minute))
		if _, err := tryQueued(q, ctx, counted(key, 4, 1, time.Minute)); !errors.Is(err, driver.ErrLocked) {
			t.Fatalf("counted behind an exclusive holder: %v; want ErrLocked", err)
		}
		mismatch("limit 3 behind a queued limit 4", counted(key, 3, 1, time.Minute), true, 4)
		mismatch("uncounted shared behind a queued limit 4", req(key, driver.Shared, time.Minute), false, 4)
		st, err := in.Inspect(ctx, key)
		if err != nil || len(st.Holders) != 1 || st.Holders[0].Token != lx.Token || st.Waiting != 1 {
			t.Errorf("Inspect after the refusals: %+v, %v; want the exclusive holder and 1 waiter", st, err)
		}
		if err := d.Release(ctx, lx); err != nil {
			t.Fatal(err)
		}
	})
}

// checkReacquireKeeps checks that a re-acquire of r's key by r's owner,
// who holds l (weight 2, value "first", limit 4), with weight 3 and
// another value keeps the token, the weight and the value.
func checkReacquireKeeps(t *testing.T, d driver.Driver, r driver.Request, l driver.Lease) {
	t.Helper()
	ctx := ctxT(t)
	key := r.Key
	in := d.(driver.Inspector)
	again := r
	again.Weight, again.Value = 3, "second"
	if l2, err := d.TryAcquire(ctx, again); err != nil || l2.Token != l.Token {
		t.Errorf("re-acquire: %+v, %v; want token %d", l2, err, l.Token)
	}
	st, err := in.Inspect(ctx, key)
	if err != nil || len(st.Holders) != 1 || st.Holders[0].Weight != 2 || st.Holders[0].Value != "first" || st.Limit != 4 {
		t.Errorf("Inspect after a re-acquire with weight 3 and another value: %+v, %v; want weight 2, value %q, limit 4", st, err, "first")
	}
}

// TestValues checks that a grant's value, any bytes up to
// driver.MaxValueLen, comes back through Inspect with the hold's weight
// and the key's limit, that a re-acquire keeps it, and that it goes with
// the release: the key keeps no row.
func TestValues(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const table = "locker_values_test"
		opts := tableOf(t, b, table)
		admin := b.db(t)
		ctx := ctxT(t)
		d := b.driver(t, opts)
		in := d.(driver.Inspector)
		if c := driver.CapabilitiesOf(d); !c.Counted || !c.Values {
			t.Fatal("Capabilities Counted or Values is false")
		}
		binary := make([]byte, driver.MaxValueLen)
		for i := range binary {
			binary[i] = byte(i * 7) // NULs, invalid UTF-8, quotes, backslashes
		}
		for _, value := range []string{"leader-1.internal:8080", string(binary), "\x00'\\\"\xff"} {
			key := uniqueKey(t, "election")
			r := req(key, driver.Exclusive, time.Minute)
			r.Value = value
			l := mustAcquire(t, d, r)
			again := r
			again.Value = "other"
			if _, err := d.TryAcquire(ctx, again); err != nil {
				t.Fatal(err)
			}
			st, err := in.Inspect(ctx, key)
			if err != nil || len(st.Holders) != 1 || st.Holders[0].Value != value || st.Holders[0].Weight != 0 || st.Limit != 0 {
				t.Fatalf("Inspect: %v, %+v; want one holder with the %d-byte value, weight 0, limit 0", err, st, len(value))
			}
			if err := d.Release(ctx, l); err != nil {
				t.Fatal(err)
			}
			st, err = in.Inspect(ctx, key)
			if err != nil || len(st.Holders) != 0 {
				t.Fatalf("Inspect after the release: %+v, %v; want no holder", st, err)
			}
			if n := countRows(t, admin, b, table, key); n != 0 {
				t.Fatalf("%d rows left after the release of a key with a value; want 0", n)
			}
		}

		checkCountedValues(t, b, d, admin, table)
	})
}

// checkCountedValues is TestValues for counted holders of d, each with
// its value and weight, in table (on b's server, administered through
// admin).
func checkCountedValues(t *testing.T, b backend, d driver.Driver, admin *sql.DB, table string) {
	t.Helper()
	ctx := ctxT(t)
	in := d.(driver.Inspector)
	// Counted holders, each with its value and weight.
	key := uniqueKey(t, "sem")
	var leases []driver.Lease
	for i, w := range []int64{1, 3} {
		r := counted(key, 5, w, time.Minute)
		r.Value = string(rune('a' + i))
		leases = append(leases, mustAcquire(t, d, r))
	}
	u := mustAcquire(t, d, counted(key, 5, 1, time.Minute)) // no value
	leases = append(leases, u)
	st, err := in.Inspect(ctx, key)
	if err != nil || st.Mode != driver.Shared || st.Limit != 5 || len(st.Holders) != 3 {
		t.Fatalf("Inspect: %+v, %v; want 3 shared holders, limit 5", st, err)
	}
	for i, want := range []driver.Holder{{Weight: 1, Value: "a"}, {Weight: 3, Value: "b"}, {Weight: 1}} {
		h := st.Holders[i]
		if h.Owner != leases[i].Owner || h.Token != leases[i].Token || h.Weight != want.Weight || h.Value != want.Value || h.Remaining <= 0 {
			t.Errorf("holder %d: %+v; want owner %s, token %d, weight %d, value %q", i, h, leases[i].Owner, leases[i].Token, want.Weight, want.Value)
		}
	}
	for _, l := range leases {
		if err := d.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if n := countRows(t, admin, b, table, key); n != 0 {
		t.Fatalf("%d rows left after the release of a counted key; want 0", n)
	}
}
