package etcddriver_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/etcddriver"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/namespace"
	"google.golang.org/grpc"
)

func TestNew(t *testing.T) {
	if _, err := etcddriver.New(nil, nil); err == nil {
		t.Error("New(nil client) succeeded")
	}
	c := newClient(t)
	d := newDriverOn(t, c, nil)
	// Without Options.MinTTL, the minimum is etcd's unit, 1s, until a
	// grant shows a longer one (TestMinTTLLearnt).
	if c := d.Capabilities(); c.MinTTL != time.Second || c.MaxTTL != etcddriver.MaxTTL || c.TTLUnit != time.Second {
		t.Errorf("Capabilities() MinTTL, MaxTTL, TTLUnit = %v, %v, %v; want 1s, %v, 1s", c.MinTTL, c.MaxTTL, c.TTLUnit, etcddriver.MaxTTL)
	}
	if p := d.Prefix(); p != etcddriver.DefaultPrefix {
		t.Errorf("Prefix() = %q; want %q", p, etcddriver.DefaultPrefix)
	}
	d2 := newDriverOn(t, c, &etcddriver.Options{MinTTL: 5 * time.Second, Prefix: "app/"})
	if lo := d2.Capabilities().MinTTL; lo != 5*time.Second {
		t.Errorf("Capabilities().MinTTL with Options.MinTTL 5s = %v", lo)
	}
	for _, bad := range []time.Duration{-time.Second, 1500 * time.Millisecond} {
		if _, err := etcddriver.New(c, &etcddriver.Options{MinTTL: bad}); err == nil {
			t.Errorf("New with MinTTL %v succeeded", bad)
		}
	}
}

// TestTTLChecks checks that TTLs etcd cannot honour are rejected by
// package locker, from the driver's Capabilities, with an error naming the
// limit, never rounded (the driver relies on that check, see package
// driver).
func TestTTLChecks(t *testing.T) {
	d := newDriverOn(t, newClient(t), &etcddriver.Options{MinTTL: 2 * time.Second})
	for _, c := range []struct {
		ttl  time.Duration
		want string
	}{
		{1500 * time.Millisecond, "below the driver's minimum of 2s"},
		{2500 * time.Millisecond, "use 2s or 3s"},
		{10*time.Second + time.Nanosecond, "use 10s or 11s"},
	} {
		m := locker.NewMutex(d, uniqueKey(t, "msg"), locker.WithTTL(c.ttl))
		err := m.LockContext(ctxT(t))
		if !errors.Is(err, locker.ErrInvalidTTL) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Mutex.LockContext with TTL %v = %v; want ErrInvalidTTL saying %q", c.ttl, err, c.want)
		}
	}
	key := uniqueKey(t, "k")
	for _, ttl := range []time.Duration{time.Second, 2500 * time.Millisecond} {
		m := locker.NewMutex(d, key, locker.WithTTL(ttl))
		if err := m.LockContext(ctxT(t)); !errors.Is(err, locker.ErrInvalidTTL) {
			t.Errorf("Mutex.LockContext with TTL %v = %v; want ErrInvalidTTL", ttl, err)
		}
	}
	m := locker.NewMutex(d, key, locker.WithTTL(time.Second))
	if err := m.LockContext(ctxT(t)); err == nil || !strings.Contains(err.Error(), "2s") {
		t.Errorf("Mutex.LockContext with TTL 1s below the minimum 2s = %v; want an error naming 2s", err)
	}
}

// TestTokenIsCreateRevision checks the token and the key layout.
func TestTokenIsCreateRevision(t *testing.T) {
	c := newClient(t)
	d := newDriverOn(t, c, &etcddriver.Options{Prefix: "tok/"})
	key := uniqueKey(t, "a/b%")
	o := owner()
	l := mustAcquire(t, d, req(key, o, driver.Exclusive, 10*time.Second))
	dir := "tok/" + strings.NewReplacer("%", "%25", "/", "%2F").Replace(key) + "/w/"
	resp, err := c.Get(ctxT(t), dir, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 {
		t.Fatalf("%d entries below %q; want 1", len(resp.Kvs), dir)
	}
	kv := resp.Kvs[0]
	if uint64(kv.CreateRevision) != l.Token {
		t.Errorf("token %d; entry's create revision %d", l.Token, kv.CreateRevision)
	}
	if v := string(kv.Value); !strings.HasSuffix(v, "/"+o) || len(v) != 16+1+len(o) {
		t.Errorf("entry's value %q; want the driver's ID and the owner %q", kv.Value, o)
	}
	if want := fmt.Sprintf("%s%016x", dir, kv.Lease); string(kv.Key) != want {
		t.Errorf("entry key %q; want %q (the lease ID)", kv.Key, want)
	}
	ttl, err := c.TimeToLive(ctxT(t), clientv3.LeaseID(kv.Lease))
	if err != nil || ttl.GrantedTTL != 10 {
		t.Errorf("the entry's lease: %+v, %v; want a granted TTL of 10s", ttl, err)
	}
	if err := d.Release(ctxT(t), l); err != nil {
		t.Fatal(err)
	}
	l2 := mustAcquire(t, d, req(key, owner(), driver.Shared, 10*time.Second))
	if l2.Token <= l.Token {
		t.Errorf("token %d after %d", l2.Token, l.Token)
	}
	d.Release(ctxT(t), l2)
}

// TestFencingCmp checks the compare that makes a user's etcd write
// conditional on the hold.
func TestFencingCmp(t *testing.T) {
	c := newClient(t)
	d := newDriverOn(t, c, nil)
	key := uniqueKey(t, "k")
	data := "fenced/" + key
	m := locker.NewMutex(d, key, locker.WithTTL(10*time.Second))
	if _, err := d.Cmp(key, 1); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Cmp of a hold never granted = %v; want ErrNotHeld", err)
	}
	if err := m.LockContext(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	tok := m.Token()
	cmp, err := d.Cmp(key, uint64(tok))
	if err != nil {
		t.Fatal(err)
	}
	write := func(v string) bool {
		t.Helper()
		resp, err := c.Txn(ctxT(t)).If(cmp).Then(clientv3.OpPut(data, v)).Commit()
		if err != nil {
			t.Fatal(err)
		}
		return resp.Succeeded
	}
	if !write("1") {
		t.Fatal("a write under the hold's compare failed while the hold is in place")
	}
	m.Unlock()
	if write("2") {
		t.Error("a write under the hold's compare succeeded after Unlock")
	}
	if _, err := d.Cmp(key, uint64(tok)); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Cmp after Unlock = %v; want ErrNotHeld", err)
	}
	m2 := locker.NewMutex(newDriver(t), key, locker.WithTTL(10*time.Second))
	if err := m2.LockContext(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	defer m2.Unlock()
	if write("3") {
		t.Error("a write under a stale hold's compare succeeded while another owner holds the key")
	}
	resp, _ := c.Get(ctxT(t), data)
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "1" {
		t.Errorf("fenced data = %v; want only the first write", resp.Kvs)
	}
}

// TestSameProcessHandlesExclude: two handles on one driver (one client,
// one process) exclude each other; etcd's concurrency.Mutex lets two
// mutexes of one session both own the lock.
func TestSameProcessHandlesExclude(t *testing.T) {
	d := newDriver(t)
	key := uniqueKey(t, "k")
	m1 := locker.NewMutex(d, key, locker.WithTTL(10*time.Second))
	m2 := locker.NewMutex(d, key, locker.WithTTL(10*time.Second))
	if err := m1.LockContext(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if m2.TryLock() {
		t.Fatal("a second handle on the same driver locked a held key")
	}
	// The driver level too: two owners of one driver.
	if _, err := d.TryAcquire(ctxT(t), req(key, owner(), driver.Exclusive, 10*time.Second)); !errors.Is(err, driver.ErrLocked) {
		t.Errorf("TryAcquire by a second owner on the same driver = %v; want ErrLocked", err)
	}
	got := make(chan error, 1)
	go func() { got <- m2.LockContext(ctxT(t)) }()
	select {
	case err := <-got:
		t.Fatalf("a second handle's Lock returned %v while the first holds the key", err)
	case <-time.After(200 * time.Millisecond):
	}
	m1.Unlock()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if m2.Token() <= m1.Token() {
		t.Errorf("token %d after %d", m2.Token(), m1.Token())
	}
	m2.Unlock()
}

// TestPrefixRanges: a lock "a" is independent of "a/b" (no key range of one
// contains the other's entries), and drivers with different prefixes are
// independent.
func TestPrefixRanges(t *testing.T) {
	d := newDriver(t)
	base := uniqueKey(t, "")
	ab := mustAcquire(t, d, req(base+"a/b", owner(), driver.Exclusive, 10*time.Second))
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	// Acquire waits for older conflicting entries of its own key only.
	a, err := d.Acquire(ctx, req(base+"a", owner(), driver.Exclusive, 10*time.Second))
	if err != nil {
		t.Fatalf("Acquire(%q) while %q is held: %v", base+"a", base+"a/b", err)
	}
	d.Release(ctxT(t), a)
	d.Release(ctxT(t), ab)

	c := newClient(t)
	d1 := newDriverOn(t, c, &etcddriver.Options{Prefix: "one/"})
	d2 := newDriverOn(t, c, &etcddriver.Options{Prefix: "two/"})
	l1 := mustAcquire(t, d1, req(base, owner(), driver.Exclusive, 10*time.Second))
	l2 := mustAcquire(t, d2, req(base, owner(), driver.Exclusive, 10*time.Second))
	d1.Release(ctxT(t), l1)
	d2.Release(ctxT(t), l2)
}

// TestNamespace runs a lock over a client whose KV and Watcher are
// wrapped by package namespace.
func TestNamespace(t *testing.T) {
	c := newClient(t)
	c.KV = namespace.NewKV(c.KV, "ns/")
	c.Watcher = namespace.NewWatcher(c.Watcher, "ns/")
	c.Lease = namespace.NewLease(c.Lease, "ns/")
	d := newDriverOn(t, c, nil)
	d2 := newDriver(t)
	key := uniqueKey(t, "k")
	m := locker.NewMutex(d, key, locker.WithTTL(10*time.Second))
	if err := m.LockContext(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	defer m.Unlock()
	raw := newClient(t)
	resp, err := raw.Get(ctxT(t), "ns/"+etcddriver.DefaultPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count == 0 {
		t.Errorf("no entry under the namespace: %v, %v", resp, err)
	}
	// Outside the namespace the key is free.
	l := mustAcquire(t, d2, req(key, owner(), driver.Exclusive, 10*time.Second))
	d2.Release(ctxT(t), l)
}

// entryLease returns the lease of the only entry of key under the default
// prefix.
func entryLease(t *testing.T, c *clientv3.Client, key string) clientv3.LeaseID {
	t.Helper()
	pfx := etcddriver.DefaultPrefix + strings.NewReplacer("%", "%25", "/", "%2F").Replace(key) + "/"
	resp, err := c.Get(ctxT(t), pfx, append(clientv3.WithFirstCreate(), clientv3.WithPrefix())...)
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("no entry of %q: %v", key, err)
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease)
}

// TestWaiterLeaseRevoked: a waiter whose own lease ends while it is queued
// gets an error, never the lock (etcd-io/etcd#11456).
func TestWaiterLeaseRevoked(t *testing.T) {
	admin := newClient(t)
	dh, dw := newDriver(t), newDriver(t)
	key := uniqueKey(t, "k")
	hl := mustAcquire(t, dh, req(key, owner(), driver.Exclusive, 10*time.Second))
	got := make(chan error, 1)
	var wl driver.Lease
	go func() {
		l, err := dw.Acquire(ctxT(t), req(key, owner(), driver.Exclusive, 10*time.Second))
		wl = l
		got <- err
	}()
	// Find the waiter's entry: the newest one.
	pfx := etcddriver.DefaultPrefix + strings.NewReplacer("%", "%25", "/", "%2F").Replace(key) + "/"
	var lease clientv3.LeaseID
	for deadline := time.Now().Add(10 * time.Second); lease == 0; {
		resp, err := admin.Get(ctxT(t), pfx, append(clientv3.WithLastCreate(), clientv3.WithPrefix())...)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) > 0 && uint64(resp.Kvs[0].CreateRevision) != hl.Token {
			lease = clientv3.LeaseID(resp.Kvs[0].Lease)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiter never queued")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := admin.Revoke(ctxT(t), lease); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err == nil {
			t.Fatalf("Acquire granted the key (token %d) to a waiter whose lease was revoked", wl.Token)
		}
		t.Logf("Acquire after its lease was revoked: %v", err)
	case <-time.After(5 * time.Second):
		dh.Release(ctxT(t), hl)
		err := <-got
		t.Fatalf("Acquire did not notice that its lease was revoked; after the holder released it returned %v (token %d)", err, wl.Token)
	}
	if err := dh.Release(ctxT(t), hl); err != nil {
		t.Fatal(err)
	}
	l := mustAcquire(t, dw, req(key, owner(), driver.Exclusive, 10*time.Second))
	dw.Release(ctxT(t), l)
}

// TestLossOnRevoke: revoking a holder's lease from another client ends the
// hold, and the holder knows before a waiter on another client, queued
// when the lease ended, is granted the key (Options.LockDelay).
func TestLossOnRevoke(t *testing.T) {
	testLossOnRevoke(t, func(t *testing.T) *clientv3.Client { return newClient(t) }, 3)
}

func testLossOnRevoke(t *testing.T, client func(*testing.T) *clientv3.Client, rounds int) {
	admin := client(t)
	for round := range rounds {
		dh, dw := newDriverOn(t, client(t), nil), newDriverOn(t, client(t), nil)
		key := uniqueKey(t, fmt.Sprint(round))
		lost := make(chan error, 1)
		mh := locker.NewMutex(dh, key, locker.WithTTL(10*time.Second), locker.WithOnLost(func(err error) { lost <- err }))
		if err := mh.LockContext(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		mw := locker.NewMutex(dw, key, locker.WithTTL(10*time.Second))
		type result struct {
			err        error
			holderKnew bool
		}
		got := make(chan result, 1)
		go func() {
			err := mw.LockContext(ctxT(t))
			r := result{err: err}
			select {
			case <-mh.Done():
				r.holderKnew = true
			default:
			}
			got <- r
		}()
		// The waiter queues: the lock delay covers a waiter whose
		// predecessor's lease ends while it waits. A newcomer that
		// finds the key free once the lease has ended is granted it at
		// once, as a TryAcquire is, and may be told before the holder
		// (a fixed sleep here let a loaded machine revoke first).
		waitEntries(t, admin, key, 2)
		if _, err := admin.Revoke(ctxT(t), entryLease(t, admin, key)); err != nil {
			t.Fatal(err)
		}
		r := <-got
		if r.err != nil {
			t.Fatalf("round %d: the waiter's Lock: %v", round, r.err)
		}
		if !r.holderKnew {
			t.Errorf("round %d: the waiter was granted the key before the holder learnt that its lease was revoked", round)
		}
		select {
		case err := <-lost:
			if !errors.Is(err, locker.ErrLost) || !errors.Is(err, driver.ErrNotHeld) {
				t.Errorf("round %d: loss reported as %v; want ErrLost wrapping driver.ErrNotHeld", round, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("round %d: OnLost not called", round)
		}
		if err := mh.UnlockContext(ctxT(t)); !errors.Is(err, locker.ErrLost) {
			t.Errorf("round %d: Unlock of the lost hold = %v; want ErrLost", round, err)
		}
		if mw.Token() <= mh.Token() {
			t.Errorf("round %d: token %d after %d", round, mw.Token(), mh.Token())
		}
		mw.Unlock()
	}
}

// TestLockDelay: a waiter granted a key because its holder's lease was
// revoked waits Options.LockDelay; one granted by a release does not.
func TestLockDelay(t *testing.T) {
	admin := newClient(t)
	const delay = 400 * time.Millisecond
	dh := newDriver(t)
	dw := newDriverOn(t, newClient(t), &etcddriver.Options{LockDelay: delay})
	for _, revoke := range []bool{false, true} {
		key := uniqueKey(t, fmt.Sprint(revoke))
		mh := locker.NewMutex(dh, key, locker.WithTTL(10*time.Second))
		if err := mh.LockContext(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		mw := locker.NewMutex(dw, key, locker.WithTTL(10*time.Second))
		got := make(chan time.Time, 1)
		go func() {
			if err := mw.LockContext(ctxT(t)); err != nil {
				t.Error(err)
			}
			got <- time.Now()
		}()
		waitEntries(t, admin, key, 2)
		start := time.Now()
		if revoke {
			if _, err := admin.Revoke(ctxT(t), entryLease(t, admin, key)); err != nil {
				t.Fatal(err)
			}
		} else {
			mh.Unlock()
		}
		wait := (<-got).Sub(start)
		t.Logf("revoked %v: the waiter took the key %v later", revoke, wait)
		if revoke && wait < delay {
			t.Errorf("the waiter took the key %v after the holder's lease was revoked; want at least the lock delay %v", wait, delay)
		}
		if !revoke && wait >= delay {
			t.Errorf("the waiter took the key %v after the holder released it; want no lock delay", wait)
		}
		if revoke {
			if err := mh.UnlockContext(ctxT(t)); !errors.Is(err, locker.ErrLost) {
				t.Errorf("Unlock of the revoked hold = %v; want ErrLost", err)
			}
		}
		mw.Unlock()
	}
}

// TestWakeUpLatency: a waiter is woken by its predecessor's release at once,
// not by etcd's 100 ms watch resync, which a watch opened at an old revision
// waits for.
func TestWakeUpLatency(t *testing.T) {
	da, db := newDriver(t), newDriver(t)
	key := uniqueKey(t, "k")
	const rounds = 20
	var waits []time.Duration
	for range rounds {
		hl := mustAcquire(t, da, req(key, owner(), driver.Exclusive, 10*time.Second))
		type res struct {
			l   driver.Lease
			err error
			at  time.Time
		}
		got := make(chan res, 1)
		go func() {
			l, err := db.Acquire(ctxT(t), req(key, owner(), driver.Exclusive, 10*time.Second))
			got <- res{l, err, time.Now()}
		}()
		time.Sleep(20 * time.Millisecond) // queued, and writes happen meanwhile
		mustAcquire(t, da, req(uniqueKey(t, "noise"), owner(), driver.Exclusive, 10*time.Second))
		released := time.Now()
		if err := da.Release(ctxT(t), hl); err != nil {
			t.Fatal(err)
		}
		r := <-got
		if r.err != nil {
			t.Fatal(r.err)
		}
		waits = append(waits, r.at.Sub(released))
		db.Release(ctxT(t), r.l)
	}
	slices.Sort(waits)
	t.Logf("wake-up after release: median %v, max %v", waits[rounds/2], waits[rounds-1])
	if waits[rounds/2] >= 50*time.Millisecond {
		t.Errorf("median wake-up %v after the release; want well below etcd's 100 ms watch resync", waits[rounds/2])
	}
}

// TestFairness: 8 handles on 4 clients share one key; the queue serves
// them in turn.
func TestFairness(t *testing.T) {
	key := uniqueKey(t, "k")
	r := runContended(t, lockerLocks(t, key), contCS, 20*contGoroutines, 20*time.Second)
	t.Log(r)
	if f := r.fairness(); f > 1.5 {
		t.Errorf("fairness (max/min acquisitions per goroutine) %.2f; want at most 1.5", f)
	}
}

// TestWriterNotStarved: a stream of overlapping readers does not keep a
// writer out: new readers queue behind it.
func TestWriterNotStarved(t *testing.T) {
	key := uniqueKey(t, "k")
	var ds []*etcddriver.Driver
	for range 3 {
		ds = append(ds, newDriver(t))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads atomic.Int64
	for i := range 6 {
		rw := locker.NewRWMutex(ds[i%3], key, locker.WithTTL(10*time.Second))
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := rw.RLockContext(ctxT(t)); err != nil {
					t.Error(err)
					return
				}
				reads.Add(1)
				time.Sleep(20 * time.Millisecond)
				rw.RUnlock()
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	time.Sleep(200 * time.Millisecond)
	w := locker.NewRWMutex(ds[0], key, locker.WithTTL(10*time.Second))
	for range 3 {
		ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
		start := time.Now()
		err := w.LockContext(ctx)
		cancel()
		if err != nil {
			t.Fatalf("writer behind a stream of readers: %v after %v", err, time.Since(start))
		}
		t.Logf("writer waited %v", time.Since(start))
		w.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
	if reads.Load() == 0 {
		t.Error("no reads")
	}
}

// rpcCounter counts a client's unary calls by method and its keep-alive
// messages.
type rpcCounter struct {
	mu    sync.Mutex
	calls map[string]int
	ka    atomic.Int64
}

func (rc *rpcCounter) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	rc.mu.Lock()
	rc.calls[method[strings.LastIndexByte(method, '/')+1:]]++
	rc.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (rc *rpcCounter) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || !strings.HasSuffix(method, "/LeaseKeepAlive") {
		return s, err
	}
	return kaCounting{s, rc}, nil
}

type kaCounting struct {
	grpc.ClientStream
	rc *rpcCounter
}

func (s kaCounting) SendMsg(m any) error {
	s.rc.ka.Add(1)
	return s.ClientStream.SendMsg(m)
}

func (rc *rpcCounter) reset() map[string]int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	c := rc.calls
	rc.calls = make(map[string]int)
	c["keep-alive"] = int(rc.ka.Swap(0))
	return c
}

func countingClient(t *testing.T) (*clientv3.Client, *rpcCounter) {
	needServer(t)
	rc := &rpcCounter{calls: make(map[string]int)}
	cfg := clientConfig(server.ClientURL)
	cfg.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(rc.unary), grpc.WithChainStreamInterceptor(rc.stream)}
	c, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, rc
}

// nonZero returns counts without its zero entries.
func nonZero(counts map[string]int) map[string]int {
	for k, v := range counts {
		if v == 0 {
			delete(counts, k)
		}
	}
	return counts
}

// TestRoundTrips counts the requests of each operation.
func TestRoundTrips(t *testing.T) {
	c, rc := countingClient(t)
	d := newDriverOn(t, c, nil)
	other := newDriver(t)
	key := uniqueKey(t, "k")
	ctx := ctxT(t)
	m := locker.NewMutex(d, key, locker.WithTTL(10*time.Second))
	m.Lock() // the first lock grants a lease and opens the key's watch
	m.Unlock()
	rc.reset()
	const n = 20
	for range n {
		m.Lock()
		m.Unlock()
	}
	got := nonZero(rc.reset())
	// The pooled lease was proved by the previous hold moments ago: no
	// keep-alive (the grants carry Lease.Start).
	want := map[string]int{"Txn": n, "DeleteRange": n}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%d uncontended Lock+Unlock pairs: %d %s; want %d (all calls: %v)", n, got[k], k, v, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d uncontended Lock+Unlock pairs made %v; want only %v", n, got, want)
	}
	// Once the last proof is older than a tenth of the TTL, a lock proves
	// the lease again, with one keep-alive beside its transaction.
	time.Sleep(time.Second + 100*time.Millisecond)
	rc.reset()
	m.Lock()
	m.Unlock()
	if got := nonZero(rc.reset()); got["keep-alive"] != 1 || got["Txn"] != 1 || got["DeleteRange"] != 1 || len(got) != 3 {
		t.Errorf("Lock+Unlock on a lease last proved over a tenth of its TTL ago: %v; want one Txn, one keep-alive, one DeleteRange", got)
	}

	testRefreshRoundTrips(t, d, rc, key)

	// Contended: a refused TryAcquire is one transaction, which leaves
	// nothing behind, every time.
	hl := mustAcquire(t, other, req(key, owner(), driver.Exclusive, 10*time.Second))
	for i := range 2 {
		rc.reset()
		if _, err := d.TryAcquire(ctx, req(key, owner(), driver.Exclusive, 10*time.Second)); !errors.Is(err, driver.ErrLocked) {
			t.Fatal(err)
		}
		got := nonZero(rc.reset())
		delete(got, "keep-alive") // a pooled lease proved over a tenth of its TTL ago needs one
		if got["Txn"] != 1 || len(got) != 1 {
			t.Errorf("refused TryAcquire %d: %v; want one Txn", i+1, got)
		}
	}
	other.Release(ctx, hl)
}

// testRefreshRoundTrips is TestRoundTrips for Refresh and RefreshBatch on
// d, whose client counts its requests in rc, with leases of key.
func testRefreshRoundTrips(t *testing.T, d *etcddriver.Driver, rc *rpcCounter, key string) {
	ctx := ctxT(t)
	l := mustAcquire(t, d, req(key, owner(), driver.Exclusive, 10*time.Second))
	rc.reset()
	if _, err := d.Refresh(ctx, l); err != nil {
		t.Fatal(err)
	}
	if got := rc.reset(); got["Range"] != 1 || got["keep-alive"] != 1 || len(got) != 2 {
		t.Errorf("Refresh: %v; want one Range and one keep-alive", got)
	}
	ls := []driver.Lease{l}
	for i := range 150 {
		ls = append(ls, mustAcquire(t, d, req(fmt.Sprintf("%s-%d", key, i), owner(), driver.Shared, 10*time.Second)))
	}
	rc.reset()
	for i, err := range d.RefreshBatch(ctx, ls) {
		if err != nil {
			t.Errorf("RefreshBatch: lease %d: %v", i, err)
		}
	}
	if got := rc.reset(); got["Txn"] != 2 || got["keep-alive"] != len(ls) || len(got) != 2 {
		t.Errorf("RefreshBatch of %d leases: %v; want 2 Txn (100 leases each) and %d keep-alives", len(ls), got, len(ls))
	}
	for _, l := range ls {
		d.Release(ctx, l)
	}
}

// TestLeasePool: an uncontended lock loop reuses one lease.
func TestLeasePool(t *testing.T) {
	c, rc := countingClient(t)
	d := newDriverOn(t, c, nil)
	rc.reset() // New's query of the minimum TTL
	key := uniqueKey(t, "k")
	m := locker.NewMutex(d, key, locker.WithTTL(10*time.Second))
	for range 20 {
		m.Lock()
		m.Unlock()
	}
	if got := rc.reset(); got["LeaseGrant"] != 1 {
		t.Errorf("20 uncontended pairs granted %d leases; want 1", got["LeaseGrant"])
	}
	// Concurrent holds each have a lease of their own.
	var ls []driver.Lease
	for i := range 3 {
		ls = append(ls, mustAcquire(t, d, req(fmt.Sprint(key, i), owner(), driver.Exclusive, 10*time.Second)))
	}
	leases := map[clientv3.LeaseID]bool{}
	for i := range ls {
		leases[entryLease(t, c, fmt.Sprint(key, i))] = true
	}
	if len(leases) != 3 {
		t.Errorf("3 concurrent holds on %d leases; want one each", len(leases))
	}
	for _, l := range ls {
		d.Release(ctxT(t), l)
	}
}

// TestClose: a closed driver refuses calls and leaves no goroutine (the
// package's TestMain checks for leaks).
func TestClose(t *testing.T) {
	d := newDriver(t)
	key := uniqueKey(t, "k")
	l := mustAcquire(t, d, req(key, owner(), driver.Exclusive, 10*time.Second))
	sub, err := d.Subscribe(ctxT(t), key)
	if err != nil {
		t.Fatal(err)
	}
	stop := d.WatchLoss(l, func(error) {})
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.TryAcquire(ctxT(t), req(key, owner(), driver.Exclusive, 10*time.Second)); err == nil {
		t.Error("TryAcquire after Close succeeded")
	}
	stop()
	sub.Close()
	d.Close()
}

// TestHandoffRoundTrips counts the requests of a waiter granted after a
// release: its queueing Txn, then (the release made elsewhere) one Range,
// the serializable read of the old holder's sentinel for the lock delay,
// or nothing when its own driver released; never a confirming Refresh,
// as the grant carries Lease.Start.
func TestHandoffRoundTrips(t *testing.T) {
	admin := newClient(t)
	c, rc := countingClient(t)
	d := newDriverOn(t, c, nil)
	other := newDriver(t)
	ttl := 10 * time.Second
	for _, same := range []bool{false, true} {
		key := uniqueKey(t, fmt.Sprint(same))
		releaser := other
		if same {
			releaser = d
		}
		hl := mustAcquire(t, releaser, req(key, owner(), driver.Exclusive, ttl))
		type res struct {
			l   driver.Lease
			err error
		}
		got := make(chan res, 1)
		go func() {
			l, err := d.Acquire(ctxT(t), req(key, owner(), driver.Exclusive, ttl))
			got <- res{l, err}
		}()
		waitEntries(t, admin, key, 2)
		rc.reset()
		if err := releaser.Release(ctxT(t), hl); err != nil {
			t.Fatal(err)
		}
		r := <-got
		if r.err != nil {
			t.Fatal(r.err)
		}
		calls := nonZero(rc.reset())
		want := map[string]int{"Range": 1}
		if same {
			want = map[string]int{"DeleteRange": 1}
		} else if calls["Range"] == 2 {
			// etcd sends a revision's events a moment before its reads
			// may ask for that revision: a read at it refused in that
			// moment is made again, of the current state.
			want["Range"] = 2
		}
		if !maps.Equal(calls, want) {
			t.Errorf("released by the waiter's own driver %v: the handoff made %v; want %v", same, calls, want)
		}
		if r.l.Start.IsZero() || time.Since(r.l.Start) > ttl/2 {
			t.Errorf("released by the waiter's own driver %v: grant %+v; want Lease.Start set, within the TTL", same, r.l)
		}
		if err := d.Release(ctxT(t), r.l); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSubscriptionsShareWatch: subscriptions of one key share the key's
// watch, are all woken by a release, and the watch closes (after
// Options.WatchLinger) once the last subscription is closed.
func TestSubscriptionsShareWatch(t *testing.T) {
	d := newDriverOn(t, newClient(t), &etcddriver.Options{WatchLinger: 50 * time.Millisecond})
	other := newDriver(t)
	key := uniqueKey(t, "k")
	var subs []driver.Subscription
	for range 2 {
		s, err := d.Subscribe(ctxT(t), key)
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, s)
	}
	if n := d.Watches(); n != 1 {
		t.Fatalf("two subscriptions of one key: %d watches; want 1", n)
	}
	l := mustAcquire(t, other, req(key, owner(), driver.Exclusive, 10*time.Second))
	if err := other.Release(ctxT(t), l); err != nil {
		t.Fatal(err)
	}
	for i, s := range subs {
		select {
		case <-s.C():
		case <-time.After(10 * time.Second):
			t.Fatalf("subscription %d not woken by a release", i)
		}
	}
	subs[0].Close()
	subs[0].Close()
	time.Sleep(200 * time.Millisecond)
	if n := d.Watches(); n != 1 {
		t.Fatalf("one live subscription left: %d watches; want 1", n)
	}
	subs[1].Close()
	deadline := time.Now().Add(10 * time.Second)
	for d.Watches() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the key's watch stayed open after its last subscription closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCloseRevokesIdleLeases: Close revokes the idle leases of its pool,
// and leaves a hold's lease alone.
func TestCloseRevokesIdleLeases(t *testing.T) {
	admin := newClient(t)
	d := newDriver(t)
	idleKey, heldKey := uniqueKey(t, "idle"), uniqueKey(t, "held")
	l := mustAcquire(t, d, req(idleKey, owner(), driver.Exclusive, 10*time.Second))
	idle := entryLease(t, admin, idleKey)
	if err := d.Release(ctxT(t), l); err != nil {
		t.Fatal(err)
	}
	// Another TTL: the pool does not give the idle lease to the hold.
	mustAcquire(t, d, req(heldKey, owner(), driver.Exclusive, 20*time.Second))
	held := entryLease(t, admin, heldKey)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	ttl := func(id clientv3.LeaseID) int64 {
		resp, err := admin.TimeToLive(ctxT(t), id)
		if err != nil {
			t.Fatal(err)
		}
		return resp.TTL
	}
	if got := ttl(idle); got > 0 {
		t.Errorf("the idle lease lives on after Close (TTL %ds); want it revoked", got)
	}
	if got := ttl(held); got <= 0 {
		t.Errorf("the held lease is gone after Close (TTL %d); want it kept until it expires", got)
	}
}

// TestNewDoesNoIO: New returns at once when etcd is down (a port nobody
// listens on), and the first call fails by its context's deadline.
func TestNewDoesNoIO(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := clientConfig("http://" + addr)
	cfg.DialTimeout = 0 // clientv3.New does not wait for a connection
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	start := time.Now()
	d, err := etcddriver.New(cli, nil)
	if err != nil {
		t.Fatalf("New with etcd down: %v; want a driver (New does no I/O)", err)
	}
	defer d.Close()
	if el := time.Since(start); el > 100*time.Millisecond {
		t.Errorf("New took %v with etcd down; want no wait", el)
	}
	if got := d.Capabilities().MinTTL; got != time.Second {
		t.Errorf("Capabilities().MinTTL before any grant = %v; want 1s", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := d.TryAcquire(ctx, req("k", owner(), driver.Exclusive, 5*time.Second)); err == nil {
		t.Fatal("TryAcquire with etcd down succeeded")
	}
	if el := time.Since(start); el > 300*time.Millisecond+200*time.Millisecond {
		t.Errorf("TryAcquire with etcd down returned after %v; want by its 300ms deadline", el)
	}
}

// minLease is a clientv3.Lease that raises a TTL below min seconds to
// min, as a cluster with an election timeout of about min/1.5 seconds
// does, and counts grants.
type minLease struct {
	clientv3.Lease
	min    int64
	grants atomic.Int64
}

func (l *minLease) Grant(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
	l.grants.Add(1)
	return l.Lease.Grant(ctx, max(ttl, l.min))
}

// TestMinTTLLearnt: without Options.MinTTL, the driver learns the
// cluster's minimum lease TTL from the first grant that etcd raised: that
// lock call fails naming the minimum, and later ones are refused by
// package locker before any I/O.
func TestMinTTLLearnt(t *testing.T) {
	c := newClient(t)
	ml := &minLease{Lease: c.Lease, min: 3}
	c.Lease = ml
	d := newDriverOn(t, c, nil)
	if n := ml.grants.Load(); n != 0 {
		t.Errorf("New granted %d leases; want none", n)
	}
	key := uniqueKey(t, "k")
	m := locker.NewMutex(d, key, locker.WithTTL(time.Second))
	err := m.LockContext(ctxT(t))
	if err == nil || !strings.Contains(err.Error(), "minimum lease TTL is 3s") {
		t.Fatalf("LockContext with TTL 1s on a cluster whose minimum is 3s: %v; want an error naming 3s", err)
	}
	if got := d.Capabilities().MinTTL; got != 3*time.Second {
		t.Errorf("Capabilities().MinTTL after a raised grant = %v; want 3s", got)
	}
	n := ml.grants.Load()
	if err := m.LockContext(ctxT(t)); !errors.Is(err, locker.ErrInvalidTTL) || !strings.Contains(err.Error(), "minimum of 3s") {
		t.Errorf("LockContext with TTL 1s again: %v; want ErrInvalidTTL naming the minimum of 3s", err)
	}
	if got := ml.grants.Load(); got != n {
		t.Errorf("the refused lock call granted %d leases; want none", got-n)
	}
	m3 := locker.NewMutex(d, key, locker.WithTTL(3*time.Second))
	if err := m3.LockContext(ctxT(t)); err != nil {
		t.Fatalf("LockContext with TTL 3s: %v", err)
	}
	if err := m3.UnlockContext(ctxT(t)); err != nil {
		t.Error(err)
	}
}
