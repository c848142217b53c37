package lockertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-locker/locker/driver"
)

// testExclusiveContention races many owners on several clients for one
// key: exactly one wins, and every other one learns that the key is locked.
func testExclusiveContention(e *env) {
	const clients, goroutines, rounds = 4, 4, 5
	ds := e.drivers(clients)
	type result struct {
		d   driver.Driver
		r   driver.Request
		l   driver.Lease
		err error
	}
	for round := range rounds {
		key := e.key(fmt.Sprintf("round%d", round))
		results := make([]result, clients*goroutines)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range results {
			d := ds[i%clients]
			r := req(key, driver.Exclusive, e.long)
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				l, err := d.TryAcquire(e.ctx, r)
				results[i] = result{d, r, l, err}
			}()
		}
		close(start)
		wg.Wait()

		var winners []result
		for _, res := range results {
			if res.err == nil {
				winners = append(winners, res)
			}
		}
		if len(winners) != 1 {
			e.t.Errorf("round %d: %d of %d owners racing for %q acquired it; want exactly 1", round, len(winners), len(results), key)
			for _, w := range winners {
				e.t.Logf("winner: %s", fmtLease(w.l))
			}
		}
		ttl := e.long
		for _, w := range winners {
			e.checkLease("TryAcquire", w.r, w.l)
			ttl = max(ttl, w.l.TTL)
		}
		for _, res := range results {
			if res.err != nil {
				e.checkLocked(res.r, res.err, ttl)
			}
		}
		for _, w := range winners {
			e.release(w.d, w.l)
		}
		e.expectFree(ds[round%clients], key, driver.Exclusive, "after the winner released")
	}
}

// testIdempotentReacquire checks that an owner that acquires a key it holds
// gets the same token and a longer lease.
func testIdempotentReacquire(e *env) {
	ds := e.drivers(2)
	a, b := ds[0], ds[1]
	key := e.key("k")
	r := req(key, driver.Exclusive, e.medium)
	l1, sent := e.acquire(a, r)
	after := time.Now()
	l2, _ := e.acquire(a, r)
	if l2.Token != l1.Token {
		e.t.Errorf("second TryAcquire by the holder returned token %d; want the first grant's %d", l2.Token, l1.Token)
	}
	e.expectLocked(b, key, driver.Exclusive, sent, validTTL(r, l1))

	// Re-acquiring extends the lease to r.TTL from then.
	e.sleepUntil(sent.Add(r.TTL / 2))
	l3, sentRe := e.acquire(a, r)
	if !withinLease(sent, validTTL(r, l1)) {
		e.inconclusive("the re-acquire was not confirmed before the first lease could have expired")
	}
	if l3.Token != l1.Token {
		e.t.Errorf("TryAcquire by the holder half-way through its lease returned token %d; want the first grant's %d", l3.Token, l1.Token)
	}
	e.sleepUntil(after.Add(grantedTTL(r, l1) + r.TTL/8))
	if err := e.expectLocked(b, key, driver.Exclusive, sentRe, validTTL(r, l3)); err == nil {
		return
	}
	if err := a.Release(e.ctx, l3); err != nil {
		if errors.Is(err, driver.ErrNotHeld) && !withinLease(sentRe, validTTL(r, l3)) {
			e.inconclusive("the release came after the re-acquired lease could have expired")
		}
		e.t.Fatalf("Release(%s): %v", fmtLease(l3), err)
	}
	e.expectFree(b, key, driver.Exclusive, "after the holder released")
}

// testReleaseWrongOwner checks that Release by anyone but the holder fails
// and leaves the hold alone.
func testReleaseWrongOwner(e *env) {
	ds := e.drivers(3)
	key := e.key("k")
	r := req(key, driver.Exclusive, e.long)
	l, sent := e.acquire(ds[0], r)
	for _, tok := range []uint64{l.Token, 0, l.Token + 1} {
		bad := l
		bad.Owner = newOwner()
		bad.Token = tok
		e.releaseNotHeld(fmt.Sprintf("Release(%s) by a non-owner", fmtLease(bad)), ds[1], bad)
		e.expectLocked(ds[2], key, driver.Exclusive, sent, r.TTL)
	}
	e.refresh(ds[0], l)
	e.release(ds[0], l)
	e.expectFree(ds[2], key, driver.Exclusive, "after the holder released")
}

// testRefreshWrongOwner checks that Refresh by anyone but the holder fails,
// and neither extends nor takes over the hold.
func testRefreshWrongOwner(e *env) {
	ds := e.drivers(3)
	key := e.key("k")
	r := req(key, driver.Exclusive, e.long)
	l, sent := e.acquire(ds[0], r)
	bad := l
	bad.Owner = newOwner()
	e.refreshNotHeld(fmt.Sprintf("Refresh(%s) by a non-owner", fmtLease(bad)), ds[1], bad)
	e.expectLocked(ds[2], key, driver.Exclusive, sent, r.TTL)
	e.refresh(ds[0], l)
	e.release(ds[0], l)
	// Had the non-owner's refresh created a hold, the key would be held.
	e.expectFree(ds[2], key, driver.Exclusive, "after the holder released")
	e.refreshNotHeld(fmt.Sprintf("Refresh(%s) of a free key", fmtLease(bad)), ds[1], bad)
	e.expectFree(ds[2], key, driver.Exclusive, "after a non-owner's refresh of a free key")
}

// testReleaseNotHeld checks Release and Refresh of leases that are not held.
func testReleaseNotHeld(e *env) {
	ds := e.drivers(2)
	a, b := ds[0], ds[1]

	never := driver.Lease{Key: e.key("never"), Owner: newOwner(), Mode: driver.Exclusive, Token: 1, TTL: e.long}
	e.releaseNotHeld("Release of a key never acquired", a, never)
	e.refreshNotHeld("Refresh of a key never acquired", a, never)
	e.expectFree(b, never.Key, driver.Exclusive, "after Refresh of a key never acquired")

	key := e.key("twice")
	l, _ := e.acquire(a, req(key, driver.Exclusive, e.long))
	if err := a.Release(e.ctx, l); err != nil {
		e.t.Errorf("first Release(%s): %v", fmtLease(l), err)
	}
	e.releaseNotHeld("second Release of a lease", a, l)
	e.refreshNotHeld("Refresh of a released lease", a, l)
	e.expectFree(b, key, driver.Exclusive, "after Refresh of a released lease")

	// A stale release must not touch the next owner's hold.
	lb, sent := e.acquire(b, req(key, driver.Exclusive, e.long))
	e.releaseNotHeld("Release of a released lease while another owner holds the key", a, l)
	e.expectLocked(a, key, driver.Exclusive, sent, lb.TTL)
	e.release(b, lb)
}

// testAbandonedRelease checks driver.Lease.Abandoned: a Release with it
// releases the owner's grant whatever its token (the reply of the grant
// was lost), and reports ErrNotHeld when the owner holds nothing; a
// Release without it and with Token 0 releases nothing, for no grant has
// token 0.
func testAbandonedRelease(e *env) {
	ds := e.drivers(2)
	a, b := ds[0], ds[1]
	key := e.key("k")
	r := req(key, driver.Exclusive, e.long)
	l, sent := e.acquire(a, r)
	unknown := driver.Lease{Key: key, Owner: r.Owner, Mode: r.Mode}
	e.releaseNotHeld("Release with Token 0, not Abandoned, of a held key", a, unknown)
	e.expectLocked(b, key, driver.Exclusive, sent, l.TTL)
	unknown.Abandoned = true
	if err := a.Release(e.ctx, unknown); err != nil {
		e.t.Errorf("Release with Abandoned of a grant whose token the caller does not know: %v; want nil", err)
	}
	e.expectFree(b, key, driver.Exclusive, "after a Release with Abandoned")
	e.releaseNotHeld("Release with Abandoned by an owner that holds nothing", a, unknown)

	// An abandoned release leaves another owner's hold alone.
	lb, sentB := e.acquire(b, req(key, driver.Exclusive, e.long))
	e.releaseNotHeld("Release with Abandoned while another owner holds the key", a, unknown)
	e.expectLocked(a, key, driver.Exclusive, sentB, lb.TTL)
	e.release(b, lb)
}

// testExpiry checks that a lease that is not refreshed expires, not
// before its TTL and not long after, and that its holder then cannot
// release or refresh it.
func testExpiry(e *env) {
	ds := e.drivers(3)
	key := e.key("k")
	r := req(key, driver.Exclusive, e.short)
	l, sent := e.acquire(ds[0], r)
	lb, sentB, ok := e.acquireAfterExpiry(ds[1], req(key, driver.Exclusive, e.long), r, l, sent, time.Now())
	if !ok {
		return
	}
	e.refreshNotHeld("Refresh of an expired lease", ds[0], l)
	e.releaseNotHeld("Release of an expired lease", ds[0], l)
	e.expectLocked(ds[2], key, driver.Exclusive, sentB, lb.TTL)
	e.release(ds[1], lb)
}

// testRefreshAfterExpiry checks that refreshing an expired lease fails and
// does not bring it back.
func testRefreshAfterExpiry(e *env) {
	ds := e.drivers(2)
	key := e.key("k")
	r := req(key, driver.Exclusive, e.short)
	l, _ := e.acquire(ds[0], r)
	ttl := grantedTTL(r, l)
	if !e.sleepUntil(time.Now().Add(2*ttl + 100*time.Millisecond)) {
		return
	}
	e.refreshNotHeld("Refresh of an expired lease", ds[0], l)
	e.expectFree(ds[1], key, driver.Exclusive, "after Refresh of an expired lease")
	e.refreshNotHeld("Refresh of an expired lease after another owner held and released the key", ds[0], l)
	e.releaseNotHeld("Release of an expired lease", ds[0], l)
	e.expectFree(ds[1], key, driver.Exclusive, "after Refresh and Release of an expired lease")
}

// testRefreshExtends checks that refreshing a lease keeps it held past its
// original TTL, each time for l.TTL from the refresh, and that it expires
// when the refreshes stop.
func testRefreshExtends(e *env) {
	ds := e.drivers(2)
	key := e.key("k")
	r := req(key, driver.Exclusive, e.medium)
	l, sent := e.acquire(ds[0], r)
	ttl := validTTL(r, l)
	last := sent
	for i := 1; i <= 3; i++ {
		if !e.sleepUntil(sent.Add(time.Duration(i) * ttl / 2)) {
			return
		}
		s := time.Now()
		nl, err := ds[0].Refresh(e.ctx, l)
		if err != nil {
			if !withinLease(last, ttl) {
				e.inconclusive("a refresh was not confirmed before the lease could have expired")
			}
			e.t.Fatalf("Refresh(%s) %v after the lease was last extended: %v", fmtLease(l), s.Sub(last), err)
		}
		if nl.Token != l.Token {
			e.t.Errorf("Refresh(%s) returned token %d; want the same", fmtLease(l), nl.Token)
		}
		last = s
		if err := e.expectLocked(ds[1], key, driver.Exclusive, last, ttl); err == nil {
			return
		}
	}
	// 1.5 TTL after the grant: only the refreshes can keep it held.
	lb, _, ok := e.acquireAfterExpiry(ds[1], req(key, driver.Exclusive, e.long), r, l, last, time.Now())
	if !ok {
		return
	}
	e.refreshNotHeld("Refresh of an expired lease after another owner acquired the key", ds[0], l)
	e.release(ds[1], lb)
}

// testTokenMonotonic checks that the tokens of a key's grants strictly
// increase across release, expiry, owners and clients, and that refresh
// and re-acquire keep them.
func testTokenMonotonic(e *env) {
	ds := e.drivers(3)
	key := e.key("k")
	var last uint64
	check := func(l driver.Lease, what string) {
		e.t.Helper()
		if l.Token <= last {
			e.t.Errorf("%s: token %d after an earlier grant's %d; want strictly increasing tokens", what, l.Token, last)
		}
		last = l.Token
	}
	r := req(key, driver.Exclusive, e.long)
	l, _ := e.acquire(ds[0], r)
	check(l, "first grant")
	e.refresh(ds[0], l) // checks the token
	if l2, _ := e.acquire(ds[0], r); l2.Token != l.Token {
		e.t.Errorf("re-acquire by the holder returned token %d; want %d", l2.Token, l.Token)
	}
	e.release(ds[0], l)

	for i := range 3 * len(ds) {
		d := ds[i%len(ds)]
		l, _ := e.acquire(d, req(key, driver.Exclusive, e.long))
		check(l, fmt.Sprintf("grant %d after a release, on client %d", i+2, i%len(ds)))
		e.release(d, l)
	}

	r = req(key, driver.Exclusive, e.short)
	l, sent := e.acquire(ds[1], r)
	check(l, "grant after releases")
	lb, _, ok := e.acquireAfterExpiry(ds[2], req(key, driver.Exclusive, e.long), r, l, sent, time.Now())
	if !ok {
		return
	}
	check(lb, "grant after an expiry")
	e.release(ds[2], lb)
}

// testContextCanceled checks that a call with a cancelled context fails
// and leaves nothing held or queued.
func testContextCanceled(e *env) {
	ds := e.drivers(3)
	canceled, cancel := context.WithCancel(e.ctx)
	cancel()
	expired, cancel2 := context.WithDeadline(e.ctx, time.Now().Add(-time.Second))
	defer cancel2()
	for name, ctx := range map[string]context.Context{"cancelled": canceled, "expired": expired} {
		key := e.key(name)
		r := req(key, driver.Exclusive, e.long)
		l, err := ds[0].TryAcquire(ctx, r)
		if err == nil {
			e.t.Errorf("TryAcquire(%s) with a %s context succeeded; want an error", fmtReq(r), name)
			e.release(ds[0], l)
			continue
		}
		if !errors.Is(err, ctx.Err()) {
			e.t.Logf("note: TryAcquire with a %s context returned %v, which does not wrap %v", name, err, ctx.Err())
		}
		e.expectFree(ds[1], key, driver.Exclusive, fmt.Sprintf("after TryAcquire with a %s context", name))

		if !e.caps.Queue {
			continue
		}
		key = e.key(name + "-queued")
		la, _ := e.acquire(ds[0], req(key, driver.Exclusive, e.long))
		r = req(key, driver.Exclusive, e.long)
		r.Queued = true
		lq, err := ds[1].TryAcquire(ctx, r)
		if err == nil {
			e.t.Errorf("TryAcquire(%s) with a %s context succeeded while another owner holds the key", fmtReq(r), name)
			e.release(ds[1], lq)
		}
		e.release(ds[0], la)
		e.expectFree(ds[2], key, driver.Exclusive, fmt.Sprintf("after a queued TryAcquire with a %s context (a queue entry left behind?)", name))
	}
}

// testWeirdKeys checks that keys that are hostile to backends work and are
// independent of each other.
func testWeirdKeys(e *env) {
	ds := e.drivers(2)
	keys := weirdKeys(e.prefix)
	hs := &weirdHolds{e: e, keys: keys, holds: make([]weirdHold, len(keys))}
	// All keys are held at once, each by its own owner: if two keys
	// map to the same backend object, the second acquire fails.
	for i, k := range keys {
		hs.keep()
		d := ds[i%len(ds)]
		r := req(k, driver.Exclusive, e.outlast)
		sent := time.Now()
		l, err := d.TryAcquire(e.ctx, r)
		if err != nil {
			if errors.Is(err, driver.ErrLocked) {
				e.t.Errorf("TryAcquire(%q) = %v, but no other owner holds this key: the driver confuses it with another key, as if it encoded keys non-injectively", k, err)
			} else {
				e.t.Errorf("TryAcquire(%q): %v", k, err)
			}
			continue
		}
		e.checkLease("TryAcquire", r, l)
		hs.holds[i] = weirdHold{d: d, l: l, sent: sent}
	}
	for i, k := range keys {
		hs.keep()
		if hs.holds[i].d == nil {
			continue
		}
		r := req(k, driver.Exclusive, e.long)
		l, err := ds[(i+1)%len(ds)].TryAcquire(e.ctx, r)
		if err == nil {
			e.t.Errorf("TryAcquire(%q) by a second owner succeeded while the key is held", k)
			ds[(i+1)%len(ds)].Release(e.ctx, l)
			continue
		}
		e.checkLocked(r, err, max(e.outlast, hs.holds[i].l.TTL))
		hs.renew(i)
	}
	hs.releaseAndRetake(ds)
}

// weirdHolds are testWeirdKeys' holds, one per key (d nil where the
// grant failed).
type weirdHolds struct {
	e     *env
	keys  []string
	holds []weirdHold
}

type weirdHold struct {
	d        driver.Driver
	l        driver.Lease
	sent     time.Time // of the last confirmed grant or renewal
	released bool
}

// keep renews the holds granted or renewed half a TTL ago: the checks
// need every hold alive. Their TTL outlasts the subtest unless the
// driver's MaxTTL is shorter: going through all the keys takes 17s on
// FerretDB, and up to a minute on a loaded machine, whose 20s leases
// (the suite's long TTL there) then ran out before the second owner's
// attempts, which the test reported as grants while the key was held.
func (hs *weirdHolds) keep() {
	for i, h := range hs.holds {
		if h.d != nil && !h.released && time.Since(h.sent) >= hs.e.outlast/2 {
			hs.renew(i)
		}
	}
}

// renew refreshes the hold of key i.
func (hs *weirdHolds) renew(i int) {
	h := &hs.holds[i]
	sent := time.Now()
	if _, err := h.d.Refresh(hs.e.ctx, h.l); err != nil {
		hs.e.t.Errorf("Refresh(%q): %v", hs.keys[i], err)
	}
	h.sent = sent
}

// releaseAndRetake releases the holds in reverse order, then takes every
// key again, also in reverse order: tokens still grow per key.
func (hs *weirdHolds) releaseAndRetake(ds []driver.Driver) {
	e := hs.e
	for i := len(hs.keys) - 1; i >= 0; i-- {
		hs.keep()
		if h := hs.holds[i]; h.d != nil {
			if err := h.d.Release(e.ctx, h.l); err != nil {
				e.t.Errorf("Release(%q): %v", hs.keys[i], err)
			}
			hs.holds[i].released = true
		}
	}
	for i := len(hs.keys) - 1; i >= 0; i-- {
		k := hs.keys[i]
		d := ds[(i+1)%len(ds)]
		l, err := d.TryAcquire(e.ctx, req(k, driver.Exclusive, e.long))
		if err != nil {
			e.t.Errorf("TryAcquire(%q) after its holder released it: %v", k, err)
			continue
		}
		if h := hs.holds[i]; h.d != nil && l.Token <= h.l.Token {
			e.t.Errorf("TryAcquire(%q) after a release returned token %d; want more than the earlier %d", k, l.Token, h.l.Token)
		}
		if err := d.Release(e.ctx, l); err != nil {
			e.t.Errorf("Release(%q): %v", k, err)
		}
	}
}

// weirdKeys returns keys, all starting or ending with p, that are hostile
// to some backend: path syntax, escapes, separators drivers might use for
// their own bookkeeping, case, Unicode normalisation, control characters,
// wildcards, and 512 bytes.
func weirdKeys(p string) []string {
	keys := []string{
		// Paths (ZooKeeper, etcd prefixes, files).
		p + "a", p + "a/", p + "a/b", p + "a//b", p + "a/.", p + "a/..", p + "a/b/..", p + "ab",
		"/" + p, "//" + p, "./" + p, "../" + p, "." + p, ".." + p, p + ".", p + "..", p + "/",
		"zookeeper/" + p, p + "/zookeeper",
		// Unicode: distinct byte strings are distinct keys, even if they
		// look or normalise alike.
		p + "ключ/锁/🔒", p + "é", p + "e\u0301", p + "K", p + "k", p + "\u00a0", p + "\u2028", p + "\ufeff",
		p + "\U0010FFFF",
		// Spaces and control characters.
		p + " ", " " + p, p + "a b", p + "\t", "\t" + p, p + "\n", p + "\r\n", p + "\x01", p + "\x1b[0m", p + "\x7f",
		// Escapes and their targets.
		p + "a+b", p + "a%20b", p + "{", p + "}x", p + "{a}", p + "%7B", p + "%7b", p + "%", p + "%%",
		p + "%2F", p + "a%2Fb", p + "a%2fb", p + "a\\b", p + "a\\/b", p + "a_b", p + "a:b", p + "a.b", p + "a-b",
		p + "a|b", p + "a\\x01", p + "a\\t", p + "&amp;", p + "&",
		// Wildcards (Redis patterns, SQL LIKE, globs) and quotes.
		p + "*", p + "?", p + "[a]", p + "a*", p + "a%", p + "a_", p + "'", p + "\"", p + "`", p + "$", p + ";", p + "#",
		p + "=", p + "@", p + "~", p + "^", p + "!", p + "(", p + ")", p + ",", p + "<>",
		// Names a driver might derive from a key for its own use.
		p + "a:fence", p + "a:token", p + "a:tok", p + "a:seq", p + "a:counter", p + "a:queue", p + "a:q",
		p + "a:owner", p + "a:lock", p + "a:shared", p + "a:readers", p + "a:notify", p + "a:ch", p + "a:f",
		p + "a:t", p + "a:r", p + "a:w", p + "a/fence", p + "a.fence", p + "a-fence", p + "a_fence",
		p + "a}:fence", p + "{a}:fence", p + "a{", p + "a/lock-", p + "a/_c_", p + "a/_lock",
	}
	// 512 bytes, the longest key; two that differ only in the last byte,
	// and one of multi-byte characters.
	long := p + strings.Repeat("x", 512-len(p)-1)
	locks := p + strings.Repeat("🔒", (512-len(p))/len("🔒"))
	keys = append(keys, long+"x", long+"y", locks+strings.Repeat("z", 512-len(locks)))

	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		if seen[k] || len(k) > 512 {
			panic(fmt.Sprintf("lockertest: bad weird key %q", k))
		}
		seen[k] = true
	}
	return keys
}

// testConcurrentMethods calls every method from many goroutines at once,
// on own keys and on keys they all use; the race detector does the rest.
func testConcurrentMethods(e *env) {
	const goroutines, iterations = 8, 20
	ds := e.drivers(2)
	c := &concurrent{
		hot:       e.key("hot"),
		hotShared: e.key("hot-shared"),
		shared:    e.sharer(),
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		d := ds[g%len(ds)]
		own := e.key(fmt.Sprintf("g%d", g))
		mode := driver.Shared
		if g%4 == 0 {
			mode = driver.Exclusive
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < iterations && e.ctx.Err() == nil; i++ {
				e.concurrentRound(c, d, own, mode)
			}
		}()
	}
	wg.Wait()
}

// concurrent is the state testConcurrentMethods' goroutines share.
type concurrent struct {
	hot, hotShared   string
	shared           bool
	holders          atomic.Int32 // of hot
	readers, writers atomic.Int32 // of hotShared
}

// concurrentRound calls every method once. Only t.Errorf is called: it
// runs on many goroutines.
func (e *env) concurrentRound(c *concurrent, d driver.Driver, own string, mode driver.Mode) {
	unsubscribe, ok := e.concurrentOwnKey(d, own)
	if !ok {
		return
	}
	defer unsubscribe()
	e.concurrentHotKey(c, d)
	if !c.shared {
		return
	}
	e.concurrentHotSharedKey(c, d, mode)
}

// concurrentOwnKey calls every method once on own, a key no one else
// uses; ok is false when it could not acquire it. The subscription to own,
// if the driver has one, stays open until the caller calls unsubscribe.
func (e *env) concurrentOwnKey(d driver.Driver, own string) (unsubscribe func(), ok bool) {
	ctx := e.ctx
	unsubscribe = func() {}
	r := req(own, driver.Exclusive, e.long)
	l, err := d.TryAcquire(ctx, r)
	if err != nil {
		e.errorf("TryAcquire(%s) of a key no one else uses: %v", fmtReq(r), err)
		return unsubscribe, false
	}
	if l2, err := d.TryAcquire(ctx, r); err != nil || l2.Token != l.Token {
		e.errorf("re-acquire(%s) = token %d, %v; want token %d", fmtReq(r), l2.Token, err, l.Token)
	}
	if l2, err := d.Refresh(ctx, l); err != nil || l2.Token != l.Token {
		e.errorf("Refresh(%s) = token %d, %v; want token %d", fmtLease(l), l2.Token, err, l.Token)
	}
	if br, ok := d.(driver.BatchRefresher); ok && e.caps.RefreshBatch {
		if errs := br.RefreshBatch(ctx, []driver.Lease{l}); len(errs) != 1 || errs[0] != nil {
			e.errorf("RefreshBatch([%s]) = %v; want [<nil>]", fmtLease(l), errs)
		}
	}
	if n, ok := d.(driver.Notifier); ok && e.caps.Notify {
		sub, err := n.Subscribe(ctx, own)
		if err != nil {
			e.errorf("Subscribe(%q): %v", own, err)
		} else {
			unsubscribe = func() { sub.Close() }
		}
	}
	if err := d.Release(ctx, l); err != nil {
		e.errorf("Release(%s): %v", fmtLease(l), err)
	}
	if err := d.Release(ctx, l); !errors.Is(err, driver.ErrNotHeld) {
		e.errorf("second Release(%s): %v; want ErrNotHeld", fmtLease(l), err)
	}
	return unsubscribe, true
}

// concurrentHotKey checks that the hot key has at most one holder at a
// time.
func (e *env) concurrentHotKey(c *concurrent, d driver.Driver) {
	ctx := e.ctx
	r := req(c.hot, driver.Exclusive, e.long)
	l, err := d.TryAcquire(ctx, r)
	if e.caps.Queue && errors.Is(err, driver.ErrLocked) {
		r.Queued = true
		l, err = d.TryAcquire(ctx, r)
	}
	switch {
	case err == nil:
		if n := c.holders.Add(1); n != 1 {
			e.errorf("%d owners hold %q at once", n, c.hot)
		}
		c.holders.Add(-1)
		if err := d.Release(ctx, l); err != nil {
			e.errorf("Release(%s): %v", fmtLease(l), err)
		}
	case errors.Is(err, driver.ErrLocked):
		// Leave the queue, if we joined it. A driver that hands the
		// key over to its queue's head may have granted it to us
		// meanwhile: then the release succeeds.
		err := d.Release(ctx, driver.Lease{Key: r.Key, Owner: r.Owner, Mode: r.Mode, Abandoned: true})
		if !errors.Is(err, driver.ErrNotHeld) && (err != nil || !e.caps.Queue) {
			e.errorf("Release by an owner that does not hold %q: %v; want ErrNotHeld", c.hot, err)
		}
	default:
		e.errorf("TryAcquire(%s): %v", fmtReq(r), err)
	}
}

// concurrentHotSharedKey checks that the hot shared key has readers
// together and writers alone.
func (e *env) concurrentHotSharedKey(c *concurrent, d driver.Driver, mode driver.Mode) {
	ctx := e.ctx
	r := req(c.hotShared, mode, e.long)
	l, err := d.TryAcquire(ctx, r)
	switch {
	case err == nil:
		if mode == driver.Exclusive {
			if w, rd := c.writers.Add(1), c.readers.Load(); w != 1 || rd != 0 {
				e.errorf("an exclusive owner holds %q together with %d exclusive and %d shared owners", c.hotShared, w-1, rd)
			}
			c.writers.Add(-1)
		} else {
			c.readers.Add(1)
			if w := c.writers.Load(); w != 0 {
				e.errorf("a shared owner holds %q together with %d exclusive owners", c.hotShared, w)
			}
			c.readers.Add(-1)
		}
		if err := d.Release(ctx, l); err != nil {
			e.errorf("Release(%s): %v", fmtLease(l), err)
		}
	case errors.Is(err, driver.ErrLocked):
	default:
		e.errorf("TryAcquire(%s): %v", fmtReq(r), err)
	}
}
