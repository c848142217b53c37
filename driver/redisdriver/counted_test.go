package redisdriver_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/go-locker/locker/internal/testserver"
)

// counted returns a counted Shared request for weight units of limit.
func counted(key, owner string, limit, weight int64, ttl time.Duration) driver.Request {
	return driver.Request{Key: key, Owner: owner, Mode: driver.Shared, TTL: ttl, Limit: limit, Weight: weight}
}

// wantLimit fails t unless err wraps a *driver.LimitError whose Limit is
// theirs, and is neither ErrLocked nor permanent.
func wantLimit(t *testing.T, what string, err error, theirs int64) {
	t.Helper()
	var le *driver.LimitError
	if !errors.Is(err, driver.ErrLimitMismatch) || !errors.As(err, &le) {
		t.Fatalf("%s: err = %v, want a *LimitError", what, err)
	}
	if le.Limit != theirs || errors.Is(err, driver.ErrLocked) || driver.IsPermanent(err) {
		t.Fatalf("%s: err = %v (Limit %d), want a transient LimitError with Limit %d", what, err, le.Limit, theirs)
	}
}

func inspect(t *testing.T, d *redisdriver.Driver, k string) driver.KeyState {
	t.Helper()
	st, err := d.Inspect(ctxT(t), k)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// weights returns the weights of st's holders by owner, and their sum.
func weights(st driver.KeyState) (map[string]int64, int64) {
	m := make(map[string]int64)
	var sum int64
	for _, h := range st.Holders {
		m[h.Owner] = h.Weight
		sum += h.Weight
	}
	return m, sum
}

// TestCounted: counted grants within the limit, refusals beyond it (with
// the remaining time of the first hold that may free units), idempotent
// re-acquire keeping the weight, limit mismatches both ways, and what
// Inspect reports.
func TestCounted(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		d := newDriver(t, b.client(t))
		k := uniqueKey(t, "k")
		a, bb, c := owner(), owner(), owner()

		la, lb := checkCountedGrants(t, ctx, d, k, a, bb, c)
		checkLimitAgreement(t, ctx, d, k, c)
		if err := d.Release(ctx, la); err != nil {
			t.Fatal(err)
		}
		lc := mustAcquire(t, d, counted(k, c, 4, 1, time.Second))
		if lc.Token <= lb.Token {
			t.Fatalf("token %d after %d", lc.Token, lb.Token)
		}
		lc2 := mustAcquire(t, d, counted(k, owner(), 4, 1, time.Second))
		for _, l := range []driver.Lease{lb, lc, lc2} {
			if err := d.Release(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		if st := inspect(t, d, k); len(st.Holders) != 0 || st.Limit != 0 {
			t.Fatalf("Inspect after the releases = %+v", st)
		}
		checkNewLimitWhenFree(t, ctx, d, k, c)
	})
}

// checkCountedGrants grants a and bb 2 units each of a limit of 4 on k
// and checks the refusals beyond it (with the remaining time of the
// first hold that may free units), that a's re-acquire with another
// weight keeps its token and weight, and what Inspect reports; it
// returns the leases of a and bb.
func checkCountedGrants(t *testing.T, ctx context.Context, d *redisdriver.Driver, k, a, bb, c string) (la, lb driver.Lease) {
	t.Helper()
	x := owner()
	la = mustAcquire(t, d, counted(k, a, 4, 2, 3*time.Second))
	lb = mustAcquire(t, d, counted(k, bb, 4, 2, 8*time.Second))
	if lb.Token <= la.Token {
		t.Fatalf("tokens %d then %d, want increasing", la.Token, lb.Token)
	}
	_, err := d.TryAcquire(ctx, counted(k, c, 4, 1, time.Second))
	if rem := lockedRemaining(t, err); rem <= 0 || rem > 3*time.Second {
		t.Fatalf("Remaining = %v, want that of the first hold to expire (<= 3s)", rem)
	}
	_, err = d.TryAcquire(ctx, req(k, x, driver.Exclusive, time.Second))
	lockedRemaining(t, err)

	// The holder again, even asking for another weight: same token,
	// same weight.
	again, err := d.TryAcquire(ctx, counted(k, a, 4, 1, 3*time.Second))
	if err != nil || again.Token != la.Token {
		t.Fatalf("re-acquire = %+v, %v; want token %d", again, err, la.Token)
	}
	st := inspect(t, d, k)
	ws, sum := weights(st)
	if st.Mode != driver.Shared || st.Limit != 4 || len(st.Holders) != 2 || ws[a] != 2 || ws[bb] != 2 || sum != 4 {
		t.Fatalf("Inspect = %+v, want limit 4, %s and %s of weight 2", st, a, bb)
	}
	return la, lb
}

// checkLimitAgreement checks that everyone must agree on the limit of
// the counted holds on k: other limits, queued or not, and an uncounted
// request are refused with a LimitError, and none joins the queue.
func checkLimitAgreement(t *testing.T, ctx context.Context, d *redisdriver.Driver, k, c string) {
	t.Helper()
	_, err := d.TryAcquire(ctx, counted(k, c, 5, 1, time.Second))
	wantLimit(t, "another limit", err, 4)
	_, err = tryQueued(d, ctx, counted(k, c, 3, 1, time.Second))
	wantLimit(t, "another limit, queued", err, 4)
	_, err = d.TryAcquire(ctx, req(k, c, driver.Shared, time.Second))
	wantLimit(t, "uncounted on counted holds", err, 4)
	if st := inspect(t, d, k); st.Waiting != 0 {
		t.Fatalf("a refused limit joined the queue: %+v", st)
	}
}

// checkNewLimitWhenFree checks that uncounted shared holds refuse counted
// requests (limit 0), and that a new limit is free once nobody holds.
func checkNewLimitWhenFree(t *testing.T, ctx context.Context, d *redisdriver.Driver, k, c string) {
	t.Helper()
	lr := mustAcquire(t, d, req(k, owner(), driver.Shared, time.Second))
	_, err := d.TryAcquire(ctx, counted(k, c, 4, 1, time.Second))
	wantLimit(t, "counted on uncounted holds", err, 0)
	if err := d.Release(ctx, lr); err != nil {
		t.Fatal(err)
	}
	l7 := mustAcquire(t, d, counted(k, c, 7, 7, time.Second))
	if err := d.Release(ctx, l7); err != nil {
		t.Fatal(err)
	}
}

// countedQueueLimit and countedQueueTTL are the limit and the TTL of
// TestCountedQueue's requests.
const countedQueueLimit, countedQueueTTL = 4, 5 * time.Second

// TestCountedQueue: a queued request of weight 3 on a limit of 4 is not
// overtaken by newcomers of weight 1, queued through other drivers, and
// releases hand the units over to the head of the queue as far as they
// fit.
func TestCountedQueue(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		d1, d2, d3 := newDriver(t, b.client(t)), newDriver(t, b.client(t)), newDriver(t, b.client(t))
		k := uniqueKey(t, "k")
		h1, h2, big, small, late := owner(), owner(), owner(), owner(), owner()
		const limit, ttl = countedQueueLimit, countedQueueTTL

		lh1 := mustAcquire(t, d1, counted(k, h1, limit, 1, ttl))
		lh2 := mustAcquire(t, d1, counted(k, h2, limit, 1, ttl))
		s2 := subscribe(t, d2, k)
		defer s2.Close()
		queueBigAheadOfSmall(t, ctx, d1, d2, d3, k, big, small, late)
		checkHandoffAsFarAsFits(t, ctx, d1, d2, d3, k, s2, lh1, lh2, h2, big, small)
		checkCountedQueueBehindExclusive(t, ctx, d1, d2, d3, k, late)
		waitNoKeys(t, b.client(t), k, 2*time.Second)
	})
}

// queueBigAheadOfSmall queues big (weight 3) through d2, then small
// (weight 1, which would fit) through d3, behind two holders of weight 1
// of a limit of 4 on k, and checks that neither small nor the newcomer
// late overtakes big, and that a queue entry has a limit too.
func queueBigAheadOfSmall(t *testing.T, ctx context.Context, d1, d2, d3 *redisdriver.Driver, k, big, small, late string) {
	t.Helper()
	const limit, ttl = countedQueueLimit, countedQueueTTL
	_, err := tryQueued(d2, ctx, counted(k, big, limit, 3, ttl))
	lockedRemaining(t, err) // 2 + 3 > 4
	// Weight 1 would fit, but big is ahead.
	_, err = tryQueued(d3, ctx, counted(k, small, limit, 1, ttl))
	lockedRemaining(t, err)
	_, err = d3.TryAcquire(ctx, counted(k, late, limit, 1, ttl))
	lockedRemaining(t, err)
	_, err = tryQueued(d3, ctx, counted(k, small, limit, 1, ttl))
	lockedRemaining(t, err)
	if st := inspect(t, d1, k); st.Waiting != 2 || len(st.Holders) != 2 {
		t.Fatalf("Inspect = %+v, want 2 holders and 2 waiting", st)
	}
	// A queue entry has a limit too.
	_, err = tryQueued(d1, ctx, counted(k, late, 5, 1, ttl))
	wantLimit(t, "another limit than the holders' and the queue's", err, limit)
}

// checkHandoffAsFarAsFits checks that h1's release (lh1) leaves 3 units,
// which big, the head of the queue, takes at once (s2 is woken), and that
// small gets its unit once h2 releases lh2; it releases them all.
func checkHandoffAsFarAsFits(t *testing.T, ctx context.Context, d1, d2, d3 *redisdriver.Driver, k string, s2 driver.Subscription, lh1, lh2 driver.Lease, h2, big, small string) {
	t.Helper()
	const limit, ttl = countedQueueLimit, countedQueueTTL
	if err := d1.Release(ctx, lh1); err != nil {
		t.Fatal(err)
	}
	wantWake(t, "handoff to big", s2)
	lbig, err := tryQueued(d2, ctx, counted(k, big, limit, 3, ttl))
	if err != nil {
		t.Fatalf("head after the release: %v", err)
	}
	if lbig.Token <= lh2.Token {
		t.Fatalf("token %d after %d", lbig.Token, lh2.Token)
	}
	st := inspect(t, d1, k)
	ws, sum := weights(st)
	if st.Limit != limit || sum != 4 || ws[big] != 3 || ws[h2] != 1 || st.Waiting != 1 {
		t.Fatalf("Inspect = %+v, want h2 (1) and big (3), small waiting", st)
	}
	_, err = tryQueued(d3, ctx, counted(k, small, limit, 1, ttl))
	lockedRemaining(t, err) // full

	if err := d1.Release(ctx, lh2); err != nil {
		t.Fatal(err)
	}
	lsmall, err := tryQueued(d3, ctx, counted(k, small, limit, 1, ttl))
	if err != nil {
		t.Fatalf("small after h2's release: %v", err)
	}
	for _, l := range []driver.Lease{lbig, lsmall} {
		if err := d1.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if st := inspect(t, d1, k); len(st.Holders) != 0 || st.Waiting != 0 {
		t.Fatalf("Inspect after the releases = %+v", st)
	}
}

// checkCountedQueueBehindExclusive checks that, behind an exclusive
// holder of k, a queued counted entry sets the limit for newcomers, and
// the release hands the key over to the run of counted entries that fit.
func checkCountedQueueBehindExclusive(t *testing.T, ctx context.Context, d1, d2, d3 *redisdriver.Driver, k, late string) {
	t.Helper()
	const ttl = countedQueueTTL
	lx := mustAcquire(t, d1, req(k, owner(), driver.Exclusive, ttl))
	q1, q2, q3 := owner(), owner(), owner()
	for _, r := range []driver.Request{counted(k, q1, 3, 2, ttl), counted(k, q2, 3, 1, ttl), counted(k, q3, 3, 1, ttl)} {
		_, err := tryQueued(d2, ctx, r)
		lockedRemaining(t, err)
	}
	_, err := tryQueued(d3, ctx, counted(k, late, 4, 1, ttl))
	wantLimit(t, "another limit than the queue's", err, 3)
	_, err = tryQueued(d3, ctx, req(k, late, driver.Shared, ttl))
	wantLimit(t, "uncounted behind a counted queue", err, 3)
	if err := d1.Release(ctx, lx); err != nil {
		t.Fatal(err)
	}
	st := inspect(t, d1, k)
	if ws, sum := weights(st); st.Limit != 3 || sum != 3 || ws[q1] != 2 || ws[q2] != 1 || st.Waiting != 1 {
		t.Fatalf("Inspect after the handoff = %+v, want q1 (2) and q2 (1), q3 waiting", st)
	}
	for _, o := range []string{q1, q2, q3} {
		if err := d2.Release(ctx, driver.Lease{Key: k, Owner: o, Mode: driver.Shared, Abandoned: true}); err != nil && o != q3 {
			t.Fatal(err)
		}
	}
}

// TestValues: a value of any bytes, up to MaxValueLen, is kept with each
// grant (exclusive, shared, counted, handed over from the queue), the
// first one through re-acquires and refreshes, and goes with the hold.
func TestValues(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := ctxT(t)
		c := b.client(t)
		d := newDriver(t, c)
		k := uniqueKey(t, "k")
		bin := "a:b\x00c\nd:" + strings.Repeat("\xff", 7)
		long := strings.Repeat("0123456789abcdef", driver.MaxValueLen/16)
		wantValues := func(what string, want map[string]string) {
			t.Helper()
			wantHolderValues(t, d, k, what, want)
		}

		// Exclusive, on a free key (not the fast path, which keeps no
		// value).
		x := owner()
		rx := req(k, x, driver.Exclusive, 5*time.Second)
		rx.Value = bin
		lx := mustAcquire(t, d, rx)
		wantValues("exclusive", map[string]string{x: bin})
		rx.Value = "second"
		if l, err := d.TryAcquire(ctx, rx); err != nil || l.Token != lx.Token {
			t.Fatalf("re-acquire = %+v, %v", l, err)
		}
		if _, err := d.Refresh(ctx, lx); err != nil {
			t.Fatal(err)
		}
		if _, err := d.TryAcquire(ctx, floorReq(lx, lx.Token+1000)); err != nil {
			t.Fatal(err)
		}
		lx.Token += 1000
		wantValues("exclusive, after re-acquire, refresh and a raised floor", map[string]string{x: bin})

		// Queued with a value: the handoff keeps it.
		q := owner()
		rq := req(k, q, driver.Exclusive, 5*time.Second)
		rq.Value = long
		_, err := tryQueued(d, ctx, rq)
		lockedRemaining(t, err)
		if err := d.Release(ctx, lx); err != nil {
			t.Fatal(err)
		}
		wantValues("handed over", map[string]string{q: long})
		lq, err := tryQueued(d, ctx, rq)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Release(ctx, lq); err != nil {
			t.Fatal(err)
		}
		wantValues("released", nil)
		checkSharedAndCountedValues(t, ctx, d, k, bin)
		wantValues("all released", nil)
		// Values live in the holds' own keys: nothing is left.
		waitNoKeys(t, c, k, 2*time.Second)
	})
}

// wantHolderValues fails t unless Inspect of k reports the holders of
// want, by owner, with their values; what says when.
func wantHolderValues(t *testing.T, d *redisdriver.Driver, k, what string, want map[string]string) {
	t.Helper()
	st := inspect(t, d, k)
	got := make(map[string]string)
	for _, h := range st.Holders {
		got[h.Owner] = h.Value
	}
	if len(got) != len(want) {
		t.Fatalf("%s: holders %+v, want %d", what, st.Holders, len(want))
	}
	for o, v := range want {
		if got[o] != v {
			t.Fatalf("%s: value of %s = %q, want %q", what, o, got[o], v)
		}
	}
}

// checkSharedAndCountedValues checks that shared holds of k, with and
// without a value, and a counted hold with the value bin keep them, the
// counted one through a refresh and a raised token floor (quorumdriver),
// which keeps its weight too; it releases them all.
func checkSharedAndCountedValues(t *testing.T, ctx context.Context, d *redisdriver.Driver, k, bin string) {
	t.Helper()
	wantValues := func(what string, want map[string]string) {
		t.Helper()
		wantHolderValues(t, d, k, what, want)
	}
	s1, s2, s3 := owner(), owner(), owner()
	r1 := req(k, s1, driver.Shared, 5*time.Second)
	r1.Value = "one"
	l1 := mustAcquire(t, d, r1)
	l2 := mustAcquire(t, d, req(k, s2, driver.Shared, 5*time.Second))
	wantValues("shared", map[string]string{s1: "one", s2: ""})
	for _, l := range []driver.Lease{l1, l2} {
		if err := d.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	r3 := counted(k, s3, 2, 2, 5*time.Second)
	r3.Value = bin
	l3 := mustAcquire(t, d, r3)
	if _, err := d.Refresh(ctx, l3); err != nil {
		t.Fatal(err)
	}
	// A raised token floor (quorumdriver) keeps weight and value.
	if _, err := d.TryAcquire(ctx, floorReq(l3, l3.Token+1000)); err != nil {
		t.Fatal(err)
	}
	wantValues("counted", map[string]string{s3: bin})
	if st := inspect(t, d, k); st.Holders[0].Weight != 2 || st.Limit != 2 || st.Holders[0].Token != l3.Token+1000 {
		t.Fatalf("Inspect = %+v", st)
	}
	l3.Token += 1000
	if err := d.Release(ctx, l3); err != nil {
		t.Fatal(err)
	}
}

// TestCountedCluster runs counted, queued and valued requests on a
// one-node Redis Cluster, which refuses a script that touches keys of
// another hash slot than its declared key's (CROSSSLOT).
func TestCountedCluster(t *testing.T) {
	parallelIfShort(t)
	srv := testserver.RedisCluster(t)
	d, d2 := newDriver(t, newClusterClient(t, srv.Addr)), newDriver(t, newClusterClient(t, srv.Addr))
	ctx := ctxT(t)
	for _, k := range []string{"sem/1", "}x{", "ключ"} {
		k = uniqueKey(t, "") + k
		a, q := owner(), owner()
		ra := counted(k, a, 3, 2, 5*time.Second)
		ra.Value = "a"
		la := mustAcquire(t, d, ra)
		rq := counted(k, q, 3, 2, 5*time.Second)
		rq.Value = "q"
		_, err := tryQueued(d2, ctx, rq)
		lockedRemaining(t, err)
		_, err = d2.TryAcquire(ctx, counted(k, owner(), 4, 1, time.Second))
		wantLimit(t, "cluster", err, 3)
		if err := d.Release(ctx, la); err != nil {
			t.Fatal(err)
		}
		lq, err := tryQueued(d2, ctx, rq)
		if err != nil {
			t.Fatal(err)
		}
		st := inspect(t, d, k)
		if len(st.Holders) != 1 || st.Holders[0].Value != "q" || st.Holders[0].Weight != 2 || st.Limit != 3 {
			t.Fatalf("Inspect = %+v", st)
		}
		if err := d2.Release(ctx, lq); err != nil {
			t.Fatal(err)
		}
	}
}
