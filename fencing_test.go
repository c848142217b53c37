//go:build go1.25

package locker_test

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/memdriver"
)

func TestGuard(t *testing.T) {
	var g locker.Guard
	if err := g.Admit("acct", 0); !errors.Is(err, locker.ErrStaleToken) {
		t.Fatalf("token 0 admitted: %v", err)
	}
	for _, tok := range []locker.Token{3, 3, 5} {
		if err := g.Admit("acct", tok); err != nil {
			t.Fatalf("Admit(%d) = %v", tok, err)
		}
	}
	err := g.Admit("acct", 4)
	var se *locker.StaleTokenError
	if !errors.As(err, &se) || se.Token != 4 || se.Highest != 5 || se.Resource != "acct" {
		t.Fatalf("Admit(4) after 5 = %v", err)
	}
	if err := g.Admit("other", 1); err != nil {
		t.Fatalf("resources are independent: %v", err)
	}
	ran := false
	if err := g.Do("acct", 2, func() error { ran = true; return nil }); !errors.Is(err, locker.ErrStaleToken) || ran {
		t.Fatalf("Do with a stale token ran=%v err=%v", ran, err)
	}
	boom := errors.New("boom")
	if err := g.Do("acct", 6, func() error { return boom }); err != boom {
		t.Fatalf("Do returned %v, want the write's error", err)
	}
	if g.Highest("acct") != 6 {
		t.Fatalf("Highest = %d", g.Highest("acct"))
	}
}

// TestGuard_RejectsPausedHolder replays Kleppmann's scenario: a holder
// loses its lease while paused, another holder writes, and the first one's
// late write is rejected.
func TestGuard_RejectsPausedHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		var g locker.Guard
		var mu sync.Mutex
		balance := 0
		write := func(tok locker.Token, v int) error {
			return g.Do("balance", tok, func() error { mu.Lock(); balance = v; mu.Unlock(); return nil })
		}
		m1 := locker.NewMutex(b.Driver(), "acct")
		m1.Lock()
		stale := m1.Token()
		b.Expire("acct") // the lease runs out while client 1 is "paused"
		<-m1.Done()
		m2 := locker.NewMutex(b.Driver(), "acct")
		m2.Lock()
		if err := write(m2.Token(), 2); err != nil {
			t.Fatal(err)
		}
		if err := write(stale, 1); !errors.Is(err, locker.ErrStaleToken) {
			t.Fatalf("late write of the old holder: %v", err)
		}
		if balance != 2 {
			t.Fatalf("balance = %d", balance)
		}
		m2.Unlock()
		if err := m1.UnlockContext(t.Context()); !errors.Is(err, locker.ErrLost) {
			t.Fatalf("unlock of the lost hold = %v", err)
		}
	})
}
