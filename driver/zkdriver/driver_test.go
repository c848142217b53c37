//go:build go1.25

package zkdriver_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/zkdriver"
	"github.com/go-locker/locker/internal/faultproxy"
	"github.com/go-locker/locker/internal/zktest"
	"github.com/go-zookeeper/zk"
)

// plainKey returns a key unique to this run whose znode name is the key
// itself (only characters the driver does not escape).
func plainKey(name string) string {
	return fmt.Sprintf("%s-%d-%d", name, time.Now().UnixNano(), keySeq.Add(1))
}

// lockNodes returns the lock nodes of key under the default root.
func lockNodes(t testing.TB, conn *zk.Conn, key string) []string {
	t.Helper()
	names, _, err := conn.Children(zkdriver.DefaultRoot + "/" + key)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		t.Fatalf("Children(%s): %v", key, err)
	}
	return names
}

// nodeOf returns the path of owner's node of key, or "".
func nodeOf(t testing.TB, conn *zk.Conn, key, owner string) string {
	t.Helper()
	for _, n := range lockNodes(t, conn, key) {
		if strings.HasPrefix(n, "_c_"+owner+"-") || strings.HasPrefix(n, "_c_"+owner+".") {
			return zkdriver.DefaultRoot + "/" + key + "/" + n
		}
	}
	return ""
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestTokenIsCzxid(t *testing.T) {
	a, b := newDriver(t), newDriver(t)
	key := plainKey("czxid")
	ra := req(key, owner(), driver.Exclusive, 5*time.Second)
	la := mustAcquire(t, a, ra)
	_, st, err := a.Conn().Exists(nodeOf(t, a.Conn(), key, ra.Owner))
	if err != nil || uint64(st.Czxid) != la.Token {
		t.Fatalf("token %d, node czxid %d (%v); want equal", la.Token, st.Czxid, err)
	}
	// Through the queue: Acquire waits, then gets a larger czxid.
	rb := req(key, owner(), driver.Exclusive, 5*time.Second)
	got := acquireBehind(t, b, a.Conn(), rb)
	if err := a.Release(ctxT(t), la); err != nil {
		t.Fatal(err)
	}
	lb := <-got
	_, st, err = b.Conn().Exists(nodeOf(t, b.Conn(), key, rb.Owner))
	if err != nil || uint64(st.Czxid) != lb.Token || lb.Token <= la.Token {
		t.Fatalf("token %d (first %d), node czxid %d (%v)", lb.Token, la.Token, st.Czxid, err)
	}
	if err := b.Release(ctxT(t), lb); err != nil {
		t.Fatal(err)
	}
	if n := lockNodes(t, a.Conn(), key); len(n) != 0 {
		t.Fatalf("nodes left: %v", n)
	}
}

// countedTestDriver is countedDriver for tests.
func countedTestDriver(t *testing.T, cnt *countingDialer, addr string, sessionTimeout time.Duration) *zkdriver.Driver {
	t.Helper()
	sess := &zkdriver.Session{Dialer: cnt.dial}
	conn, _, err := zk.Connect([]string{addr}, sessionTimeout, sess.ConnOption(), quiet(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	d, err := zkdriver.New(conn, sess, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Wait(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestRoundTrips(t *testing.T) {
	var cnt countingDialer
	d := countedTestDriver(t, &cnt, server(t).Addr, 30*time.Second)
	ctx := context.Background()
	count := func(what string, want int64, f func()) {
		t.Helper()
		before := cnt.writes.Load()
		f()
		if got := cnt.writes.Load() - before; got != want {
			t.Errorf("%s: %d round trips; want %d", what, got, want)
		}
	}
	// The root exists once any key was locked.
	if err := d.Release(ctx, mustAcquire(t, d, req(plainKey("root"), owner(), driver.Exclusive, 10*time.Second))); err != nil {
		t.Fatal(err)
	}
	key := plainKey("rt")
	r := req(key, owner(), driver.Exclusive, 10*time.Second)
	var l driver.Lease
	// The first acquire of a key this driver has not seen also creates
	// the key's node, first: a new key costs one round trip more, not two.
	count("first TryAcquire of a new key", 2, func() { l = mustAcquire(t, d, r) })
	count("Release", 1, func() {
		if err := d.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
	})
	r.Owner = owner()
	count("TryAcquire", 1, func() { l = mustAcquire(t, d, r) })
	count("TryAcquire by the holder", 1, func() {
		if l2 := mustAcquire(t, d, r); l2.Token != l.Token {
			t.Fatalf("re-acquire: token %d; want %d", l2.Token, l.Token)
		}
	})
	count("Refresh", 1, func() {
		if _, err := d.Refresh(ctx, l); err != nil {
			t.Fatal(err)
		}
	})
	count("Release", 1, func() {
		if err := d.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
	})
	m := locker.NewMutex(d, key)
	count("Mutex Lock+Unlock", 2, func() {
		m.Lock()
		m.Unlock()
	})
	// A key whose node another driver made: the create of the key's node
	// fails (it exists), then the lock node's.
	other := countedTestDriver(t, &cnt, server(t).Addr, 30*time.Second)
	r.Owner = owner()
	count("first TryAcquire of an existing key", 2, func() { l = mustAcquire(t, other, r) })
	if err := other.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	// A known key whose node ZooKeeper deleted meanwhile (an idle
	// container): the multi fails, the key's node is made again.
	parent := zkdriver.ParentPath(zkdriver.DefaultRoot, key)
	if err := d.Conn().Delete(parent, -1); err != nil {
		t.Fatal(err)
	}
	r.Owner = owner()
	count("TryAcquire of a known key whose node was deleted", 3, func() { l = mustAcquire(t, d, r) })
	if err := d.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	testBatchRoundTrips(t, d, count)
}

// testBatchRoundTrips is TestRoundTrips for RefreshBatch on d; count
// checks the round trips of a call.
func testBatchRoundTrips(t *testing.T, d *zkdriver.Driver, count func(what string, want int64, f func())) {
	ctx := context.Background()
	var ls []driver.Lease
	for i := range 20 {
		ls = append(ls, mustAcquire(t, d, req(plainKey(fmt.Sprint("batch", i)), owner(), driver.Shared, 10*time.Second)))
	}
	count("RefreshBatch of 20 leases", 1, func() {
		for i, err := range d.RefreshBatch(ctx, ls) {
			if err != nil {
				t.Errorf("lease %d: %v", i, err)
			}
		}
	})
	for _, l := range ls {
		if err := d.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAcquireLeaseStart checks that a lease Acquire grants after a wait
// carries Lease.Start, the send time of the node's last write (within the
// last half of the TTL, after the call began), so that the front-end
// needs no confirming Refresh; and that a later Refresh writes the node
// (one round trip) and leaves Start zero.
func TestAcquireLeaseStart(t *testing.T) {
	var cnt countingDialer
	a := newDriver(t)
	b := countedTestDriver(t, &cnt, server(t).Addr, 10*time.Second)
	key := plainKey("start")
	la := mustAcquire(t, a, req(key, owner(), driver.Exclusive, 10*time.Second))
	rb := req(key, owner(), driver.Exclusive, 4*time.Second)
	got := make(chan driver.Lease, 1)
	called := time.Now()
	go func() {
		l, err := b.Acquire(ctxT(t), rb)
		if err != nil {
			t.Errorf("Acquire: %v", err)
		}
		got <- l
	}()
	waitFor(t, 10*time.Second, "b's node", func() bool { return len(lockNodes(t, a.Conn(), key)) == 2 })
	time.Sleep(50 * time.Millisecond) // let b set its watch
	if err := a.Release(ctxT(t), la); err != nil {
		t.Fatal(err)
	}
	lb := <-got
	now := time.Now()
	switch {
	case lb.Start.IsZero():
		t.Fatalf("Acquire after a wait = %+v; want Lease.Start set", lb)
	case lb.Start.Before(called) || lb.Start.After(now):
		t.Errorf("Acquire: Start %v; want between the call (%v) and its return (%v)", lb.Start, called, now)
	case now.Sub(lb.Start) > rb.TTL/2:
		t.Errorf("Acquire: Start %v ago; want within the last half of the TTL %v", now.Sub(lb.Start), rb.TTL)
	}
	if lb.TTL != rb.TTL || lb.Token == 0 {
		t.Errorf("Acquire = %+v; want TTL %v and a token", lb, rb.TTL)
	}
	before := cnt.writes.Load()
	l2, err := b.Refresh(ctxT(t), lb)
	if err != nil {
		t.Fatal(err)
	}
	if n := cnt.writes.Load() - before; n != 1 {
		t.Errorf("Refresh: %d round trips; want 1", n)
	}
	if l2.Token != lb.Token || l2.TTL != rb.TTL || !l2.Start.IsZero() {
		t.Errorf("Refresh = %+v; want token %d, TTL %v and no Start", l2, lb.Token, rb.TTL)
	}
	if err := b.Release(ctxT(t), l2); err != nil {
		t.Fatal(err)
	}
}

// TestAmbiguousCreate loses the reply to a create: the retry by the same
// owner finds the node by its name and returns its token, and a release by
// the owner removes it; no ghost is left.
func TestAmbiguousCreate(t *testing.T) {
	srv := server(t)
	obs := newDriver(t)
	for _, retry := range []bool{true, false} {
		t.Run(fmt.Sprintf("retry=%v", retry), func(t *testing.T) {
			p := faultproxy.ForTest(t, srv.Addr)
			d := connect(t, []string{p.Addr()}, 10*time.Second, nil)
			key := plainKey("ambiguous")
			// Make the key's node first: a create under a missing
			// parent fails (and would wait for its lost reply).
			warm := mustAcquire(t, d, req(key, owner(), driver.Exclusive, 5*time.Second))
			if err := d.Release(ctxT(t), warm); err != nil {
				t.Fatal(err)
			}
			r := req(key, owner(), driver.Exclusive, 5*time.Second)
			p.DropReplies(true)
			done := make(chan error, 1)
			go func() {
				_, err := d.TryAcquire(ctxT(t), r)
				done <- err
			}()
			waitFor(t, 10*time.Second, "the node", func() bool { return nodeOf(t, obs.Conn(), key, r.Owner) != "" })
			p.Reset() // the client sees its connection fail, and reconnects
			p.DropReplies(false)
			if err := <-done; err == nil {
				t.Fatal("TryAcquire whose reply was lost succeeded")
			}
			path := nodeOf(t, obs.Conn(), key, r.Owner)
			_, st, err := obs.Conn().Exists(path)
			if err != nil {
				t.Fatal(err)
			}
			if retry {
				l, err := d.TryAcquire(ctxT(t), r)
				if err != nil {
					t.Fatalf("retry: %v", err)
				}
				if l.Token != uint64(st.Czxid) {
					t.Fatalf("retry: token %d; want the first node's czxid %d", l.Token, st.Czxid)
				}
				if n := lockNodes(t, obs.Conn(), key); len(n) != 1 {
					t.Fatalf("nodes after the retry: %v; want one", n)
				}
				if err := d.Release(ctxT(t), l); err != nil {
					t.Fatal(err)
				}
			} else {
				// The front-end's cleanup: Release with the owner and no
				// token.
				_ = d.Release(ctxT(t), driver.Lease{Key: key, Owner: r.Owner, Mode: r.Mode})
			}
			if n := lockNodes(t, obs.Conn(), key); len(n) != 0 {
				t.Fatalf("nodes left: %v", n)
			}
		})
	}
}

// TestContextCanceled checks that an Acquire whose context ends returns
// promptly and leaves no node (deleted in the background), and that a call whose reply does not come
// returns when its context ends.
func TestContextCanceled(t *testing.T) {
	srv := server(t)
	a, b := newDriver(t), newDriver(t)
	key := plainKey("ctx")
	la := mustAcquire(t, a, req(key, owner(), driver.Exclusive, 10*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := b.Acquire(ctx, req(key, owner(), driver.Exclusive, 10*time.Second))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire: %v; want DeadlineExceeded", err)
	}
	if late := time.Since(start) - 300*time.Millisecond; late > time.Second {
		t.Errorf("Acquire returned %v after its deadline", late)
	}
	// The waiter's node is deleted in the background.
	waitNodes(t, a.Conn(), key, 1, 5*time.Second)
	if err := a.Release(ctxT(t), la); err != nil {
		t.Fatal(err)
	}

	// A reply that never comes: the call returns at the deadline.
	p := faultproxy.ForTest(t, srv.Addr)
	c := connect(t, []string{p.Addr()}, 10*time.Second, nil)
	p.DropReplies(true)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	start = time.Now()
	r := req(plainKey("ctx2"), owner(), driver.Exclusive, 10*time.Second)
	_, err = c.TryAcquire(ctx2, r)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("TryAcquire without reply: %v; want DeadlineExceeded", err)
	}
	if late := time.Since(start) - 200*time.Millisecond; late > time.Second {
		t.Errorf("TryAcquire returned %v after its deadline", late)
	}
	p.Reset()
	p.DropReplies(false)
	// The front-end cleans up with Release; whatever remains of the
	// abandoned create is gone afterwards.
	_ = c.Release(ctxT(t), driver.Lease{Key: r.Key, Owner: r.Owner, Mode: r.Mode})
	waitFor(t, 10*time.Second, "no node left", func() bool { return len(lockNodes(t, a.Conn(), r.Key)) == 0 })
}

// TestSessionExpiry partitions a holder until the server expires its
// session: the holder learns of the loss (its local deadline) before a
// waiter gets the lock, the expiry is reported when the partition heals,
// and the new session never takes the old node for its own.
func TestSessionExpiry(t *testing.T) {
	parallelIfShort(t)
	srv := server(t)
	const session = 1500 * time.Millisecond
	p := faultproxy.ForTest(t, srv.Addr)
	h := connect(t, []string{p.Addr()}, session, nil)
	w := newDriver(t)
	key := plainKey("expiry")

	// Directly: a lease watched for loss.
	r := req(key, owner(), driver.Exclusive, session)
	l := mustAcquire(t, h, r)
	lost := make(chan error, 1)
	stop := h.WatchLoss(l, func(err error) { lost <- err })
	defer stop()
	oldSession := h.Session().ID()

	// Through the front-end: a Mutex on another key, and a waiter.
	// The TTL leaves the holder's deadline well before the server's
	// expiry, so that a slow machine does not make the test flaky.
	mkey := plainKey("expiry-mutex")
	m := locker.NewMutex(h, mkey, locker.WithTTL(session*2/3), locker.WithErrorHandler(func(error) {}))
	if err := m.LockContext(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	oldToken := m.Token()
	wm := locker.NewMutex(w, mkey, locker.WithTTL(5*time.Second))
	lostFirst := make(chan bool, 1)
	go func() {
		if err := wm.LockContext(ctxT(t)); err != nil {
			t.Errorf("waiter: %v", err)
		}
		select {
		case <-m.Done():
			lostFirst <- true
		default:
			lostFirst <- false
		}
	}()
	time.Sleep(100 * time.Millisecond)

	p.Partition(true)
	if !<-lostFirst {
		t.Fatal("the waiter acquired while the holder still believed it held the lock")
	}
	// The waiter may have got the lock by reclaiming the holder's node
	// (its TTL ran out) before the session expired: keep the partition
	// until the session has surely expired.
	time.Sleep(2 * session)
	if !errors.Is(m.Err(), locker.ErrLost) {
		t.Errorf("holder's Err() = %v; want ErrLost", m.Err())
	}
	if wm.Token() <= oldToken {
		t.Errorf("waiter's token %d is not above the lost hold's %d", wm.Token(), oldToken)
	}
	select {
	case err := <-lost:
		t.Fatalf("loss reported during the partition: %v", err)
	default:
	}

	p.Partition(false)
	checkNewSession(t, h, r, l, oldSession, lost)
	if err := m.UnlockContext(ctxT(t)); !errors.Is(err, locker.ErrLost) {
		t.Errorf("Unlock of the lost hold: %v; want ErrLost", err)
	}
	wm.Unlock()
}

// checkNewSession is TestSessionExpiry once the partition healed: h
// reports the loss of l (granted for r in session oldSession) on lost,
// gets a new session, refuses to refresh l, and grants r again with a new
// token.
func checkNewSession(t *testing.T, h *zkdriver.Driver, r driver.Request, l driver.Lease, oldSession int64, lost <-chan error) {
	t.Helper()
	select {
	case err := <-lost:
		if !errors.Is(err, driver.ErrNotHeld) {
			t.Errorf("loss: %v; want an error wrapping ErrNotHeld", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no loss reported after the partition healed")
	}
	waitFor(t, 20*time.Second, "a new session", func() bool { id := h.Session().ID(); return id != 0 && id != oldSession })
	if _, err := h.Refresh(ctxT(t), l); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Refresh of the expired session's lease: %v; want ErrNotHeld", err)
	}
	l2, err := h.TryAcquire(ctxT(t), r)
	if err != nil {
		t.Fatalf("TryAcquire by the same owner in the new session: %v", err)
	}
	if l2.Token == l.Token {
		t.Fatalf("the new session got the old session's token %d", l.Token)
	}
	if err := h.Release(ctxT(t), l2); err != nil {
		t.Fatal(err)
	}
}

// TestDisconnectSurvives partitions a holder for less than its session
// timeout: the session, and the hold with it, survives.
func TestDisconnectSurvives(t *testing.T) {
	parallelIfShort(t)
	srv := server(t)
	const session = 4 * time.Second
	p := faultproxy.ForTest(t, srv.Addr)
	h := connect(t, []string{p.Addr()}, session, nil)
	m := locker.NewMutex(h, plainKey("disconnect"), locker.WithTTL(session), locker.WithErrorHandler(func(error) {}))
	if err := m.LockContext(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	id := h.Session().ID()
	p.Partition(true)
	time.Sleep(session / 4)
	p.Reset()
	p.Partition(false)
	time.Sleep(session) // renewals resume
	select {
	case <-m.Done():
		t.Fatalf("hold lost across a short disconnection: %v", m.Err())
	default:
	}
	if h.Session().ID() != id {
		t.Fatalf("session changed from %x to %x", id, h.Session().ID())
	}
	if err := m.UnlockContext(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

func TestTTLLimit(t *testing.T) {
	d := connect(t, []string{server(t).Addr}, 2*time.Second, nil)
	if c := d.Capabilities(); c.MinTTL != zkdriver.MinTTL || c.MaxTTL != 2*time.Second {
		t.Fatalf("Capabilities() MinTTL, MaxTTL = %v, %v; want %v, 2s", c.MinTTL, c.MaxTTL, zkdriver.MinTTL)
	}
	// Both errors name the fixes with their numbers: a session timeout of
	// at least the TTL, or a TTL of at most the session timeout.
	fixes := func(err error) bool {
		s := fmt.Sprint(err)
		return strings.Contains(s, "session timeout") && strings.Contains(s, "at least 3s") && strings.Contains(s, "at most 2s")
	}
	_, err := d.TryAcquire(ctxT(t), req(plainKey("ttl"), owner(), driver.Exclusive, 3*time.Second))
	if !driver.IsPermanent(err) || !fixes(err) {
		t.Fatalf("TryAcquire with a TTL above the session timeout: %v; want a permanent error naming both fixes", err)
	}
	m := locker.NewMutex(d, plainKey("ttl"), locker.WithTTL(3*time.Second))
	err = m.LockContext(ctxT(t))
	if !errors.Is(err, locker.ErrInvalidTTL) || !fixes(err) {
		t.Fatalf("LockContext with a TTL above the session timeout: %v; want ErrInvalidTTL naming both fixes", err)
	}
	t.Log(err)
	m = locker.NewMutex(d, plainKey("ttl"), locker.WithTTL(2*time.Second))
	if err := m.LockContext(ctxT(t)); err != nil {
		t.Fatalf("TTL equal to the session timeout: %v", err)
	}
	m.Unlock()
}

func TestACL(t *testing.T) {
	srv := server(t)
	root := "/acl-" + plainKey("root")
	acl := zk.DigestACL(zk.PermAll, "alice", "secret")
	a := connect(t, []string{srv.Addr}, 10*time.Second, &zkdriver.Options{Root: root, ACL: acl})
	if err := a.Conn().AddAuth("digest", []byte("alice:secret")); err != nil {
		t.Fatal(err)
	}
	b := connect(t, []string{srv.Addr}, 10*time.Second, &zkdriver.Options{Root: root})
	key := plainKey("acl")
	la := mustAcquire(t, a, req(key, owner(), driver.Exclusive, 10*time.Second))

	_, err := b.TryAcquire(ctxT(t), req(key, owner(), driver.Exclusive, 10*time.Second))
	if !errors.Is(err, zk.ErrNoAuth) || !driver.IsPermanent(err) {
		t.Fatalf("another tenant's TryAcquire: %v; want a permanent error wrapping zk.ErrNoAuth", err)
	}
	names, _, err := a.Conn().Children(root + "/" + key)
	if err != nil || len(names) != 1 {
		t.Fatalf("Children = %v, %v", names, err)
	}
	for _, p := range []string{root + "/" + key + "/" + names[0], root + "/" + key} {
		if err := b.Conn().Delete(p, -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Fatalf("another tenant's Delete(%s): %v; want zk.ErrNoAuth", p, err)
		}
	}
	if _, err := a.Refresh(ctxT(t), la); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctxT(t), la); err != nil {
		t.Fatal(err)
	}
	m := locker.NewMutex(a, key, locker.WithTTL(5*time.Second))
	m.Lock()
	m.Unlock()
}

func TestOptions(t *testing.T) {
	srv := server(t)
	sess := new(zkdriver.Session)
	conn, _, err := zk.Connect([]string{srv.Addr}, 10*time.Second, sess.ConnOption(), quiet(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := zkdriver.New(nil, sess, nil); err == nil {
		t.Error("New(nil conn) succeeded")
	}
	// Without a Session, the session timeout is declared (TestPlainConnection).
	plain, err := zkdriver.New(conn, nil, &zkdriver.Options{SessionTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("New(nil Session): %v", err)
	}
	if err := plain.Session().Wait(ctxT(t)); err != nil || plain.Session().ID() != conn.SessionID() {
		t.Fatalf("New(nil Session): Wait: %v, session %#x; want the connection's %#x", err, plain.Session().ID(), conn.SessionID())
	}
	if err := plain.Release(ctxT(t), mustAcquire(t, plain, req("plain", owner(), driver.Exclusive, 5*time.Second))); err != nil {
		t.Fatalf("New(nil Session): Release: %v", err)
	}
	other := new(zkdriver.Session)
	conn2, _, err := zk.Connect([]string{srv.Addr}, 10*time.Second, other.ConnOption(), quiet(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	if _, err := zkdriver.New(conn, other, nil); err == nil {
		t.Error("New with a Session passed to another connection succeeded")
	}
	for _, root := range []string{"locker", "/locker/", "/zookeeper/x", "/a//b", "/a/.."} {
		if _, err := zkdriver.New(conn, sess, &zkdriver.Options{Root: root}); err == nil {
			t.Errorf("New with root %q succeeded", root)
		}
	}
	if _, err := zkdriver.New(conn, sess, &zkdriver.Options{ACL: []zk.ACL{}}); err == nil {
		t.Error("New with an empty ACL succeeded")
	}
	// A custom root, several levels deep, created on first use.
	root := "/custom-" + plainKey("root") + "/locks"
	d, err := zkdriver.New(conn, sess, &zkdriver.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Wait(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	l := mustAcquire(t, d, req("k", owner(), driver.Exclusive, 5*time.Second))
	if names, _, err := conn.Children(root + "/k"); err != nil || len(names) != 1 {
		t.Fatalf("Children(%s/k) = %v, %v", root, names, err)
	}
	if err := d.Release(ctxT(t), l); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.TryAcquire(ctxT(t), req("k", owner(), driver.Exclusive, 5*time.Second)); !errors.Is(err, zkdriver.ErrClosed) {
		t.Errorf("TryAcquire after Close: %v; want ErrClosed", err)
	}
	// Connect with no server to reach gives up with its context.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := zkdriver.Connect(ctx, []string{"127.0.0.1:1"}, time.Second, nil, quiet(t)); err == nil {
		t.Error("Connect to a closed port succeeded")
	}
}

// TestFIFO queues readers and writers behind a writer: they are served in
// arrival order, consecutive readers together, and a reader that arrives
// after a waiting writer waits for it (Curator's read-write lock).
func TestFIFO(t *testing.T) {
	ds := []*zkdriver.Driver{newDriver(t), newDriver(t), newDriver(t), newDriver(t), newDriver(t)}
	key := plainKey("fifo")
	first := mustAcquire(t, ds[0], req(key, owner(), driver.Exclusive, 10*time.Second))
	modes := []driver.Mode{driver.Shared, driver.Shared, driver.Exclusive, driver.Shared}
	ws := newWaiters(t)
	for i, m := range modes {
		ws.queue(i, ds[i+1], ds[0].Conn(), req(key, owner(), m, 10*time.Second))
	}
	next, expectNone := ws.next, ws.none
	expectNone()
	if err := ds[0].Release(ctxT(t), first); err != nil {
		t.Fatal(err)
	}
	r1, r2 := next(), next()
	if r1.i+r2.i != 1 {
		t.Fatalf("granted %d and %d; want the two readers 0 and 1", r1.i, r2.i)
	}
	expectNone()
	for _, g := range []grant{r1, r2} {
		if err := ds[g.i+1].Release(ctxT(t), g.l); err != nil {
			t.Fatal(err)
		}
	}
	w := next()
	if w.i != 2 {
		t.Fatalf("granted %d; want the writer 2", w.i)
	}
	expectNone()
	if err := ds[3].Release(ctxT(t), w.l); err != nil {
		t.Fatal(err)
	}
	r3 := next()
	if r3.i != 3 {
		t.Fatalf("granted %d; want the reader 3", r3.i)
	}
	if r3.l.Token <= w.l.Token || w.l.Token <= r1.l.Token {
		t.Errorf("tokens %d, %d, %d not increasing", r1.l.Token, w.l.Token, r3.l.Token)
	}
	if err := ds[4].Release(ctxT(t), r3.l); err != nil {
		t.Fatal(err)
	}
}

// TestNoHerd checks with the server's own watch list (wchp) that each
// lock node is watched by at most two of the waiters: the one behind it and
// the one behind that.
func TestNoHerd(t *testing.T) {
	srv := server(t)
	if srv.External() {
		t.Skip("needs the four-letter word wchp")
	}
	const waiters = 6
	holder := newDriver(t)
	key := plainKey("herd")
	hl := mustAcquire(t, holder, req(key, owner(), driver.Exclusive, 10*time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range waiters {
		d := newDriver(t)
		r := req(key, owner(), driver.Exclusive, 10*time.Second)
		wg.Go(func() {
			l, err := d.Acquire(ctx, r)
			if err == nil {
				_ = d.Release(context.Background(), l)
			}
		})
		waitFor(t, 10*time.Second, "the node", func() bool { return nodeOf(t, holder.Conn(), key, r.Owner) != "" })
	}
	prefix := zkdriver.DefaultRoot + "/" + key + "/"
	var watched map[string]int
	waitFor(t, 10*time.Second, "the waiters' watches", func() bool {
		out, err := zktest.FourLetter(srv.Addr, "wchp")
		if err != nil {
			t.Fatal(err)
		}
		watched = map[string]int{}
		path := ""
		total := 0
		for _, line := range strings.Split(out, "\n") {
			switch {
			case strings.HasPrefix(line, "/"):
				path = line
			case strings.HasPrefix(strings.TrimSpace(line), "0x") && strings.HasPrefix(path, prefix):
				watched[path]++
				total++
			}
		}
		return total == 2*waiters-1
	})
	for p, n := range watched {
		if n > 2 {
			t.Errorf("%s has %d watchers; want at most 2", p, n)
		}
	}
	cancel()
	wg.Wait()
	if err := holder.Release(ctxT(t), hl); err != nil {
		t.Fatal(err)
	}
}

// TestReclaimExpired checks that a hold that is never refreshed is freed
// after its TTL although its session lives on, and that its holder then
// cannot refresh or release it.
func TestReclaimExpired(t *testing.T) {
	a, b := newDriver(t), newDriver(t)
	key := plainKey("reclaim")
	const ttl = 300 * time.Millisecond
	sent := time.Now()
	la := mustAcquire(t, a, req(key, owner(), driver.Exclusive, ttl))
	lb, err := b.Acquire(ctxT(t), req(key, owner(), driver.Exclusive, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(sent); elapsed < ttl {
		t.Fatalf("granted %v after a lease of %v", elapsed, ttl)
	}
	if lb.Token <= la.Token {
		t.Errorf("token %d after %d", lb.Token, la.Token)
	}
	if _, err := a.Refresh(ctxT(t), la); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Refresh of the reclaimed lease: %v; want ErrNotHeld", err)
	}
	if err := a.Release(ctxT(t), la); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Release of the reclaimed lease: %v; want ErrNotHeld", err)
	}
	if err := b.Release(ctxT(t), lb); err != nil {
		t.Fatal(err)
	}
}

// TestWaiterSessionExpiry partitions a waiter until its session expires,
// while the key is released: the waiter never gets the lock (its node went
// with its session), its Acquire fails, and others can lock the key.
func TestWaiterSessionExpiry(t *testing.T) {
	parallelIfShort(t)
	srv := server(t)
	const session = time.Second
	p := faultproxy.ForTest(t, srv.Addr)
	w := connect(t, []string{p.Addr()}, session, nil)
	h := newDriver(t)
	key := plainKey("waiter-expiry")
	hl := mustAcquire(t, h, req(key, owner(), driver.Exclusive, 10*time.Second))
	rw := req(key, owner(), driver.Exclusive, session)
	res := make(chan error, 1)
	go func() {
		l, err := w.Acquire(ctxT(t), rw)
		if err == nil {
			err = fmt.Errorf("granted %+v", l)
		}
		res <- err
	}()
	waitFor(t, 10*time.Second, "the waiter's node", func() bool { return nodeOf(t, h.Conn(), key, rw.Owner) != "" })
	time.Sleep(100 * time.Millisecond)
	p.Partition(true)
	if err := h.Release(ctxT(t), hl); err != nil {
		t.Fatal(err)
	}
	// The server expires the waiter's session and deletes its node.
	waitFor(t, 10*time.Second, "the waiter's node to go", func() bool { return nodeOf(t, h.Conn(), key, rw.Owner) == "" })
	time.Sleep(session)
	p.Partition(false)
	select {
	case err := <-res:
		if strings.HasPrefix(err.Error(), "granted") {
			t.Fatalf("the waiter of an expired session got the lock: %v", err)
		}
		t.Logf("waiter: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter's Acquire did not return")
	}
	l := mustAcquire(t, h, req(key, owner(), driver.Exclusive, 10*time.Second))
	if err := h.Release(ctxT(t), l); err != nil {
		t.Fatal(err)
	}
}

// TestForeignLeaseRefused checks the contract for a lease another Driver
// granted: Refresh and Release through a second Driver, with the lease's
// token or by owner with Token 0, are refused with driver.ErrNotHeld and
// leave the hold as it is, to be refreshed and released by the Driver
// that granted it.
func TestForeignLeaseRefused(t *testing.T) {
	a, b := newDriver(t), newDriver(t)
	key := plainKey("foreign")
	r := req(key, owner(), driver.Exclusive, 10*time.Second)
	l := mustAcquire(t, a, r)
	path := nodeOf(t, a.Conn(), key, r.Owner)
	if path == "" {
		t.Fatal("no node after the grant")
	}
	byOwner := driver.Lease{Key: key, Owner: r.Owner, Mode: r.Mode}
	if _, err := b.Refresh(ctxT(t), l); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Refresh through another driver: %v; want driver.ErrNotHeld", err)
	}
	for _, lease := range []driver.Lease{l, byOwner} {
		if err := b.Release(ctxT(t), lease); !errors.Is(err, driver.ErrNotHeld) {
			t.Errorf("Release(%+v) through another driver: %v; want driver.ErrNotHeld", lease, err)
		}
	}
	if got := nodeOf(t, b.Conn(), key, r.Owner); got != path {
		t.Fatalf("node after another driver's refused calls: %q; want %q, held", got, path)
	}
	if _, err := b.TryAcquire(ctxT(t), req(key, owner(), driver.Exclusive, 10*time.Second)); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("TryAcquire by another owner: %v; want driver.ErrLocked", err)
	}
	if _, err := a.Refresh(ctxT(t), l); err != nil {
		t.Fatalf("Refresh through the granting driver: %v", err)
	}
	if err := a.Release(ctxT(t), l); err != nil {
		t.Fatalf("Release through the granting driver: %v", err)
	}
	if got := nodeOf(t, b.Conn(), key, r.Owner); got != "" {
		t.Fatalf("node after the release: %q", got)
	}
}
