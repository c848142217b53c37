package quorumdriver_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
)

// mute is a member whose next answers to TryAcquire are lost: the request
// takes effect, but its answer does not come back before the caller gives
// up, as on a slow connection or a loaded machine.
type mute struct {
	*memdriver.Driver
	lose atomic.Int32 // the number of answers still to lose
}

func (m *mute) TryAcquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	l, err := m.Driver.TryAcquire(ctx, req)
	if m.lose.Add(-1) >= 0 {
		<-ctx.Done()
		return driver.Lease{}, ctx.Err()
	}
	return l, err
}

// muteQuorum returns a quorum of three mute memdriver members with a
// member timeout of 20ms, and the members.
func muteQuorum(t *testing.T, bs []*memdriver.Backend) (driver.Driver, []*mute) {
	t.Helper()
	return wrappedQuorum(t, bs, func(m *memdriver.Driver) *mute { return &mute{Driver: m} })
}

// reacquireKeeps checks that a re-acquire of r by its holder through d,
// which first held it with lease l, keeps l's token, and that l can still
// be renewed.
func reacquireKeeps(t *testing.T, d driver.Driver, r driver.Request, l driver.Lease, bs []*memdriver.Backend) {
	t.Helper()
	l2, err := d.TryAcquire(t.Context(), r)
	if err != nil {
		t.Fatalf("re-acquire: %v", err)
	}
	if l2.Token != l.Token {
		t.Errorf("re-acquire by the holder: token %d; want the grant's %d (members hold %v, %v, %v)",
			l2.Token, l.Token, bs[0].Holders(r.Key), bs[1].Holders(r.Key), bs[2].Holders(r.Key))
	}
	if _, err := d.Refresh(t.Context(), l); err != nil {
		t.Errorf("Refresh of the first grant after the re-acquire: %v", err)
	}
}

// TestReacquireAfterLateGrant: a member whose grant came too late to count
// holds it with a token of its own, higher than the quorum's. A re-acquire
// by the holder keeps the quorum's token, which the other members hold,
// instead of taking that member's higher one (the conformance suite's
// IdempotentReacquire saw the token change on a loaded machine).
func TestReacquireAfterLateGrant(t *testing.T) {
	bs := newBackends(3)
	d, ms := muteQuorum(t, bs)
	r := req("k", time.Second)
	// Member 2's counter is ahead: its next token for k is 2, the others' 1.
	other := req(r.Key, time.Second)
	if _, err := bs[2].Driver().TryAcquire(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	if err := bs[2].Driver().Release(t.Context(), driver.Lease{Key: r.Key, Owner: other.Owner, Mode: driver.Exclusive, Abandoned: true}); err != nil {
		t.Fatal(err)
	}
	ms[2].lose.Store(1)
	l, err := d.TryAcquire(t.Context(), r)
	if err != nil {
		t.Fatalf("first acquire: %v", err)
	}
	reacquireKeeps(t, d, r, l, bs)
}

// TestReacquireAfterGiveBack: a re-acquire by the holder that reaches too
// few members gives back what it got, the holder's own grant on the member
// that answered; that member grants the next attempt a new token. The
// next attempt keeps the token that a majority still holds.
func TestReacquireAfterGiveBack(t *testing.T) {
	bs := newBackends(3)
	d, ms := muteQuorum(t, bs)
	r := req("k", time.Second)
	l, err := d.TryAcquire(t.Context(), r)
	if err != nil {
		t.Fatalf("first acquire: %v", err)
	}
	// Members 1 and 2 lose their answers to the next attempt and to its
	// second round (the one member answering is not a majority).
	ms[1].lose.Store(2)
	ms[2].lose.Store(2)
	if _, err := d.TryAcquire(t.Context(), r); err == nil {
		t.Fatal("re-acquire granted with one member of three answering")
	}
	reacquireKeeps(t, d, r, l, bs)
}
