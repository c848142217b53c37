package zkdriver_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/faultproxy"
	"github.com/go-locker/locker/internal/zktest"
	"github.com/go-zookeeper/zk"
)

// ensemble returns a 3-server ensemble started for the tests that need one
// (once per test binary) or skips t.
func ensemble(t *testing.T) *zktest.Ensemble {
	t.Helper()
	drivertest.Long(t, "starts three ZooKeeper servers")
	ens.Lock()
	defer ens.Unlock()
	if ens.e == nil && ens.err == nil {
		ens.e, ens.err = zktest.StartEnsemble(3)
	}
	if ens.err != nil {
		zktest.SkipOrFail(t, ens.err)
	}
	return ens.e
}

var ens struct {
	sync.Mutex
	e   *zktest.Ensemble
	err error
}

func stopEnsemble() error {
	ens.Lock()
	defer ens.Unlock()
	if ens.e == nil {
		return nil
	}
	err := ens.e.Close()
	ens.e = nil
	return err
}

// TestEnsembleLeaderKill kills the leader while a lock is held and others
// wait for it: the hold survives (its session does), then the waiters get
// the lock in turn, with increasing tokens.
func TestEnsembleLeaderKill(t *testing.T) {
	e := ensemble(t)
	const session, ttl = 8 * time.Second, 6 * time.Second
	addrs := e.Addrs()
	key := plainKey("leader")
	errs := locker.WithErrorHandler(func(err error) { t.Logf("error handler: %v", err) })

	leader, err := e.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The holder is connected to the leader, so that it loses its
	// connection when the leader dies.
	hd := connect(t, addrs, session, nil, zk.WithHostProvider(&orderedHosts{first: leader.Addr}))
	if hd.Conn().Server() != leader.Addr {
		t.Fatalf("holder connected to %s; want the leader %s", hd.Conn().Server(), leader.Addr)
	}
	h := locker.NewMutex(hd, key, locker.WithTTL(ttl), errs)
	if err := h.LockContext(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	first := h.Token()

	const waiters = 3
	ms := make([]*locker.Mutex, waiters)
	for i := range ms {
		ms[i] = locker.NewMutex(connect(t, addrs, session, nil), key, locker.WithTTL(ttl), errs)
	}
	grants := lockAll(t, ms)
	time.Sleep(300 * time.Millisecond) // the waiters queue up

	t.Logf("killing leader %d", leader.ID)
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := leader.Restart(); err != nil {
			t.Errorf("restarting server %d: %v", leader.ID, err)
		}
	}()
	start := time.Now()
	nl, err := e.Leader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("server %d leads after %v", nl.ID, time.Since(start))
	// Long enough that the hold would have been lost without renewals
	// across the election.
	time.Sleep(ttl)
	select {
	case <-h.Done():
		t.Fatalf("the hold was lost across the leader's death: %v", h.Err())
	case g := <-grants:
		t.Fatalf("waiter %d acquired while the hold lasted", g.i)
	default:
	}
	if hd.Conn().Server() == leader.Addr {
		t.Errorf("the holder is still connected to the dead leader")
	}
	if err := h.UnlockContext(ctxT(t)); err != nil {
		t.Fatalf("unlock after the election: %v", err)
	}
	serveAll(t, ms, grants, first)
}

// A tokenGrant is the token waiter i was granted, 0 if its lock failed.
type tokenGrant struct {
	i     int
	token locker.Token
}

// lockAll has each of ms lock, within 60s, and returns the channel that
// receives their grants.
func lockAll(t *testing.T, ms []*locker.Mutex) <-chan tokenGrant {
	grants := make(chan tokenGrant, len(ms))
	for i := range ms {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := ms[i].LockContext(ctx); err != nil {
				t.Errorf("waiter %d: %v", i, err)
				grants <- tokenGrant{i, 0}
				return
			}
			grants <- tokenGrant{i, ms[i].Token()}
		}()
	}
	return grants
}

// serveAll checks that every waiter of ms is granted the key, within 60s,
// with tokens growing from first, and unlocks it.
func serveAll(t *testing.T, ms []*locker.Mutex, grants <-chan tokenGrant, first locker.Token) {
	t.Helper()
	last := first
	for range ms {
		var g tokenGrant
		select {
		case g = <-grants:
		case <-time.After(60 * time.Second):
			t.Fatal("a waiter never acquired")
		}
		if g.token == 0 {
			t.FailNow()
		}
		if g.token <= last {
			t.Errorf("waiter %d got token %d after %d", g.i, g.token, last)
		}
		last = g.token
		if err := ms[g.i].UnlockContext(ctxT(t)); err != nil {
			t.Errorf("waiter %d unlock: %v", g.i, err)
		}
	}
}

// orderedHosts is a zk.HostProvider that tries first, then the others in
// order (go-zookeeper's own provider shuffles the servers).
type orderedHosts struct {
	first   string
	servers []string
	i       int
}

func (o *orderedHosts) Init(servers []string) error {
	o.servers = []string{o.first}
	for _, s := range servers {
		if s != o.first {
			o.servers = append(o.servers, s)
		}
	}
	o.i = -1
	return nil
}

func (o *orderedHosts) Len() int { return len(o.servers) }

func (o *orderedHosts) Next() (string, bool) {
	o.i++
	retry := o.i > 0 && o.i%len(o.servers) == 0
	return o.servers[o.i%len(o.servers)], retry
}

func (o *orderedHosts) Connected() {}

// TestEnsembleSessionExpiry cuts a holder off from the ensemble until its
// session expires: the holder learns of the loss before a waiter on the
// ensemble gets the lock, and the driver reports the expiry once it
// reconnects.
func TestEnsembleSessionExpiry(t *testing.T) {
	e := ensemble(t)
	const session = 1500 * time.Millisecond
	p := faultproxy.ForTest(t, e.Servers[0].Addr)
	hd := connect(t, []string{p.Addr()}, session, nil)
	key := plainKey("ens-expiry")

	l := mustAcquire(t, hd, req(plainKey("ens-lease"), owner(), driver.Exclusive, session))
	lost := make(chan error, 1)
	defer hd.WatchLoss(l, func(err error) { lost <- err })()

	h := locker.NewMutex(hd, key, locker.WithTTL(session*2/3), locker.WithErrorHandler(func(error) {}))
	if err := h.LockContext(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	w := locker.NewMutex(connect(t, e.Addrs(), 10*time.Second, nil), key, locker.WithTTL(5*time.Second))
	lostFirst := make(chan bool, 1)
	go func() {
		if err := w.LockContext(ctxT(t)); err != nil {
			t.Errorf("waiter: %v", err)
		}
		select {
		case <-h.Done():
			lostFirst <- true
		default:
			lostFirst <- false
		}
	}()
	time.Sleep(200 * time.Millisecond)

	p.Partition(true)
	if !<-lostFirst {
		t.Fatal("the waiter acquired while the holder still believed it held the lock")
	}
	// The waiter may have got the lock by reclaiming the holder's node
	// (its TTL ran out) before the session expired: keep the partition
	// until the session has surely expired.
	time.Sleep(2 * session)
	if w.Token() <= h.Token() {
		t.Errorf("waiter's token %d not above %d", w.Token(), h.Token())
	}
	p.Partition(false)
	select {
	case err := <-lost:
		if !errors.Is(err, driver.ErrNotHeld) {
			t.Errorf("loss: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the session's expiry was never reported")
	}
	w.Unlock()
	if err := h.UnlockContext(ctxT(t)); !errors.Is(err, locker.ErrLost) {
		t.Errorf("holder unlock: %v; want ErrLost", err)
	}
}
