package quorumdriver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/internal/testflag"
	"github.com/go-locker/locker/internal/testserver"
)

// faultTTL is the lease length of the fault tests.
const faultTTL = 600 * time.Millisecond

// quiet drops the renewal errors that the front-end would log: the tests
// cause them on purpose.
var quiet = locker.WithErrorHandler(func(error) {})

func addrsOf(ss []*testserver.Server) []string {
	a := make([]string, len(ss))
	for i, s := range ss {
		a[i] = s.Addr
	}
	return a
}

// holdKey locks key through package locker on d with faultTTL, and closes
// the client at t's end.
func holdKey(t *testing.T, d driver.Driver, key string) *locker.Hold {
	t.Helper()
	c := locker.New(d, quiet)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	h, err := c.Mutex(key, locker.WithTTL(faultTTL)).Acquire(ctxT(t))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	return h
}

// wantLocked checks, through a quorum driver of its own, that key is held
// by someone else.
func wantLocked(t *testing.T, addrs []string, key string) {
	t.Helper()
	other := redisQuorum(t, addrs, nil)
	l, err := other.TryAcquire(ctxT(t), req(key, faultTTL))
	if err == nil {
		_ = other.Release(ctxT(t), l)
		t.Fatalf("another owner was granted %q (token %d) while it was held", key, l.Token)
	}
	if !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("another owner's TryAcquire: %v, want ErrLocked", err)
	}
}

// TestKillOneMemberWhileHolding: with one of three members killed, the hold
// is renewed by the two others for many TTLs, nobody else is granted the
// key, and the release succeeds.
func TestKillOneMemberWhileHolding(t *testing.T) {
	parallelIfShort(t)
	ss := privateServers(t, 3)
	addrs := addrsOf(ss)
	h := holdKey(t, redisQuorum(t, addrs, nil), "kill-one")
	if err := ss[0].Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * faultTTL)
	select {
	case <-h.Done():
		t.Fatalf("hold lost with one member of three killed: %v", h.Err())
	default:
	}
	wantLocked(t, addrs, "kill-one")
	if err := h.Release(ctxT(t)); err != nil {
		t.Fatalf("Release with one member killed: %v", err)
	}
}

// TestKillTwoMembersWhileHolding: with two of three members killed, the
// hold is declared lost before its TTL, counted from the kill, runs out.
func TestKillTwoMembersWhileHolding(t *testing.T) {
	parallelIfShort(t)
	ss := privateServers(t, 3)
	h := holdKey(t, redisQuorum(t, addrsOf(ss), nil), "kill-two")
	killed := time.Now()
	if err := errors.Join(ss[0].Kill(), ss[1].Kill()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Done():
	case <-time.After(10 * faultTTL):
		t.Fatal("hold not declared lost 10 TTLs after two of three members were killed")
	}
	if el := time.Since(killed); el >= faultTTL {
		t.Fatalf("loss declared %v after the kill; want before the TTL (%v) ends", el, faultTTL)
	} else {
		t.Logf("loss declared %v after the kill (TTL %v): %v", el, faultTTL, h.Err())
	}
	if !errors.Is(h.Err(), locker.ErrLost) {
		t.Fatalf("hold ended with %v; want ErrLost", h.Err())
	}
}

// TestBlackholedMember: a member that swallows every byte costs each call
// one member timeout (TTL/10), not the TTL: locks and unlocks go on, and a
// hold is renewed for many TTLs.
func TestBlackholedMember(t *testing.T) {
	parallelIfShort(t)
	addrs := poolAddrs(t, 3)
	d := redisQuorum(t, addrs, nil)
	madeOf(t, d).proxies[1].Blackhole(true)
	c := locker.New(d, quiet)
	defer c.Close(context.Background())
	m := c.Mutex("blackholed", locker.WithTTL(faultTTL))
	var worst time.Duration
	for i := range 5 {
		start := time.Now()
		if err := m.LockContext(ctxT(t)); err != nil {
			t.Fatalf("lock %d: %v", i, err)
		}
		if err := m.UnlockContext(ctxT(t)); err != nil {
			t.Fatalf("unlock %d: %v", i, err)
		}
		worst = max(worst, time.Since(start))
	}
	// A grant waits for the black-holed member's timeout (60ms), the
	// release too: far below the TTL even on a loaded machine.
	if worst > faultTTL/2 {
		t.Fatalf("a lock and unlock took %v with one member black-holed; want < TTL/2 (%v)", worst, faultTTL/2)
	}
	t.Logf("slowest lock+unlock with one member black-holed: %v", worst)
	h, err := m.Acquire(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * faultTTL)
	select {
	case <-h.Done():
		t.Fatalf("hold lost with one member black-holed: %v", h.Err())
	default:
	}
	if err := h.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// TestMembersRestartedEmpty: members killed and restarted without their
// data (one at a time, then all three) lose their holds and floors, yet
// every grant's token exceeds the one before: the members' tokens come
// from their clocks (one host here, so the clocks agree).
func TestMembersRestartedEmpty(t *testing.T) {
	parallelIfShort(t)
	ss := privateServers(t, 3)
	d := redisQuorum(t, addrsOf(ss), nil)
	var last uint64
	grant := func(step string) {
		t.Helper()
		var l driver.Lease
		var err error
		// A restarted member's connections fail once: retry as the
		// front-end would.
		for range 20 {
			if l, err = d.TryAcquire(ctxT(t), req("restart", faultTTL)); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if l.Token <= last {
			t.Fatalf("%s: token %d after %d", step, l.Token, last)
		}
		last = l.Token
		if step != "held across restart" {
			_ = d.Release(ctxT(t), l)
		}
	}
	restart := func(s *testserver.Server) {
		t.Helper()
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := s.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	grant("first")
	for i, s := range ss {
		restart(s)
		grant("after restarting member " + string(rune('0'+i)))
	}
	grant("held across restart")
	for _, s := range ss {
		restart(s)
	}
	grant("after restarting all members")
}

// parallelIfShort runs t beside the package's other tests in the quick run:
// its servers and proxies are its own.
func parallelIfShort(t *testing.T) {
	if !testflag.Long() {
		t.Parallel()
	}
}
