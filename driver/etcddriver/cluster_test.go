package etcddriver_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/etcddriver"
	"github.com/go-locker/locker/internal/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// clusterTTL is the lease of the cluster tests: long enough for the
// holder's renewals to ride out an election (the members' election
// timeout is 300 ms), short enough that an unrenewed lease would run out
// within the test.
const clusterTTL = 3 * time.Second

// queuedEntries returns the number of entries of key.
func queuedEntries(t *testing.T, c *clientv3.Client, key string) int64 {
	t.Helper()
	pfx := etcddriver.DefaultPrefix + strings.NewReplacer("%", "%25", "/", "%2F").Replace(key) + "/"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, pfx, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Logf("counting entries: %v", err)
		return -1
	}
	return resp.Count
}

// waitEntries waits until key has n entries.
func waitEntries(t *testing.T, c *clientv3.Client, key string, n int64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for queuedEntries(t, c, key) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%q never had %d entries", key, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCluster runs the driver on a 3-member cluster, each driver with a
// client of every member.
func TestCluster(t *testing.T) {
	parallelIfShort(t)
	c := etcdtest.StartCluster(t, 3)
	admin := clusterClient(t, c)
	if err := waitReady(ctxT(t), admin); err != nil {
		t.Fatal(err)
	}
	t.Run("Revoke", func(t *testing.T) {
		// Revoking a holder's lease through another client: the holder
		// learns of the loss before a waiter on a third client is
		// granted the key.
		testLossOnRevoke(t, func(t *testing.T) *clientv3.Client { return clusterClient(t, c) }, 3)
	})
	t.Run("LeaderKill", func(t *testing.T) { testLeaderKill(t, c, admin) })
}

// testLeaderKill kills the leader while a lock is held and two waiters on
// other clients are queued: the hold survives the election (its renewals
// go on through another member), the waiters keep their places, then
// acquisitions go on in order with growing tokens.
func testLeaderKill(t *testing.T, c *etcdtest.Cluster, admin *clientv3.Client) {
	var errsMu sync.Mutex
	var handled []error
	onErr := locker.WithErrorHandler(func(err error) {
		errsMu.Lock()
		handled = append(handled, err)
		errsMu.Unlock()
	})
	mutex := func(key string) *locker.Mutex {
		d := newDriverOn(t, clusterClient(t, c), nil)
		return locker.NewMutex(d, key, locker.WithTTL(clusterTTL), onErr)
	}
	key := uniqueKey(t, "k")
	mh := mutex(key)
	if err := mh.LockContext(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	grants := make(chan waiterGrant, 2)
	var ws []*locker.Mutex
	for i := range 2 {
		mw := mutex(key)
		ws = append(ws, mw)
		go func() {
			err := mw.LockContext(ctxT(t))
			grants <- waiterGrant{i, mw.Token(), err}
		}()
		waitEntries(t, admin, key, int64(i+2))
	}

	leader := killLeader(t, c)

	// A TTL after the stop, only renewals through the new leader can
	// have kept the hold: the local deadline would have passed.
	time.Sleep(clusterTTL + time.Second)
	checkHeldThrough(t, mh, grants)
	if n := queuedEntries(t, admin, key); n != 3 {
		t.Errorf("%d entries after the election; want the holder's and two waiters'", n)
	}
	last := mh.Token()
	if err := mh.UnlockContext(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	last = serveInOrder(t, grants, ws, last)
	last = lockOn(t, ws, last)
	errsMu.Lock()
	for _, err := range handled {
		t.Logf("reported during the election (retried): %v", err)
	}
	errsMu.Unlock()

	// The stopped member rejoins and the lock keeps working.
	if err := c.Members[leader].Restart(); err != nil {
		t.Fatal(err)
	}
	if err := mh.LockContext(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if mh.Token() <= last {
		t.Errorf("token %d after %d", mh.Token(), last)
	}
	mh.Unlock()
}

// A waiterGrant is what the LockContext of waiter i returned.
type waiterGrant struct {
	i   int
	tok locker.Token
	err error
}

// checkHeldThrough checks that the hold of mh survived the election and
// that no waiter was granted the key meanwhile.
func checkHeldThrough(t *testing.T, mh *locker.Mutex, grants <-chan waiterGrant) {
	t.Helper()
	select {
	case <-mh.Done():
		t.Fatalf("the hold ended during the election: %v", mh.Err())
	default:
	}
	select {
	case g := <-grants:
		t.Fatalf("waiter %d returned while the holder holds the key: token %d, %v", g.i, g.tok, g.err)
	default:
	}
}

// serveInOrder checks that the waiters ws are granted the key in the
// order they queued, with tokens growing from last, and unlocks each; it
// returns the last token.
func serveInOrder(t *testing.T, grants <-chan waiterGrant, ws []*locker.Mutex, last locker.Token) locker.Token {
	t.Helper()
	for want := range 2 {
		select {
		case g := <-grants:
			if g.err != nil {
				t.Fatalf("waiter %d: %v", g.i, g.err)
			}
			if g.i != want {
				t.Errorf("waiter %d was granted the key before waiter %d, which queued first", g.i, want)
			}
			if g.tok <= last {
				t.Errorf("waiter %d got token %d after %d; want increasing tokens", g.i, g.tok, last)
			}
			last = g.tok
			if err := ws[g.i].UnlockContext(ctxT(t)); err != nil {
				t.Errorf("waiter %d: Unlock: %v", g.i, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("waiter %d not served after the holder released", want)
		}
	}
	return last
}

// killLeader kills the leader of c, waits for a new one, and returns the
// killed member's index.
func killLeader(t *testing.T, c *etcdtest.Cluster) int {
	t.Helper()
	leader, err := c.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	c.Members[leader].Kill()
	t.Logf("killed leader %s in %v", c.Members[leader].Name, time.Since(stopped).Round(time.Millisecond))
	next, err := c.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("new leader %s after %v", c.Members[next].Name, time.Since(stopped).Round(time.Millisecond))
	return leader
}

// lockOn has the Mutexes ws lock and unlock in turn, five times, checking
// that the tokens keep growing from last; it returns the last token.
func lockOn(t *testing.T, ws []*locker.Mutex, last locker.Token) locker.Token {
	t.Helper()
	for i := range 5 {
		m := ws[i%2]
		if err := m.LockContext(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if m.Token() <= last {
			t.Errorf("token %d after %d", m.Token(), last)
		}
		last = m.Token()
		m.Unlock()
	}
	return last
}
