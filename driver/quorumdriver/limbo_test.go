package quorumdriver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
	"github.com/go-locker/locker/driver/quorumdriver"
	"github.com/go-locker/locker/internal/drivertest"
)

// lagging is a member whose releases, while it lags, do not reach it
// before the caller gives up: each stays on its way until land, as a
// request does on a slow connection or in the buffer of a stalled server
// after its client timed out.
type lagging struct {
	*memdriver.Driver
	held drivertest.Backlog[driver.Lease]
}

func (m *lagging) Release(ctx context.Context, l driver.Lease) error {
	if m.held.Hold(l) {
		<-ctx.Done()
		return ctx.Err()
	}
	return m.Driver.Release(ctx, l)
}

// land delivers the releases on their way, in order, and stops lagging.
func (m *lagging) land(t *testing.T) {
	t.Helper()
	for _, l := range m.held.Land() {
		if err := m.Driver.Release(t.Context(), l); err != nil && !errors.Is(err, driver.ErrNotHeld) {
			t.Fatalf("late release %+v: %v", l, err)
		}
	}
}

// laggingQuorum returns a quorum of three lagging memdriver members, with
// their backends.
func laggingQuorum(t *testing.T) (driver.Driver, []*memdriver.Backend, []*lagging) {
	t.Helper()
	bs := newBackends(3)
	d, ms := wrappedQuorum(t, bs, func(m *memdriver.Driver) *lagging { return &lagging{Driver: m} })
	return d, bs, ms
}

// wrappedQuorum returns a quorum, with a member timeout of 20ms, of the
// drivers of bs each wrapped by wrap, and the wrapped members.
func wrappedQuorum[M driver.Driver](t *testing.T, bs []*memdriver.Backend, wrap func(*memdriver.Driver) M) (driver.Driver, []M) {
	t.Helper()
	ms := make([]M, len(bs))
	members := make([]driver.Driver, len(bs))
	for i, b := range bs {
		ms[i] = wrap(b.Driver())
		members[i] = ms[i]
	}
	d, err := quorumdriver.New(members, &quorumdriver.Options{MemberTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return d, ms
}

// startLag makes m's releases lag until land.
func (m *lagging) startLag() { m.held.Start() }

// TestLateGiveBack checks that a give-back that reaches a member late
// cannot undo a later grant that the quorum counted. An attempt that got
// a minority gives back what it got; if that release is still on its way
// when the next attempt, with the same owner, is granted, and then lands,
// it deletes the member's part of the grant. With two such members of
// three, another owner got a majority while the first still believed it
// held the key (the fault matrix saw holds overlap, by 5 and 9 ms, on a
// loaded machine).
func TestLateGiveBack(t *testing.T) {
	const key, ttl = "k", 10 * time.Second
	d, bs, ms := laggingQuorum(t)
	req := func(owner string) driver.Request {
		return driver.Request{Key: key, Owner: owner, Mode: driver.Exclusive, TTL: ttl}
	}
	hold := func(i int, owner string) {
		t.Helper()
		if _, err := bs[i].Driver().TryAcquire(t.Context(), req(owner)); err != nil {
			t.Fatalf("member %d: TryAcquire(%s): %v", i, owner, err)
		}
	}
	free := func(i int, owner string) {
		t.Helper()
		if err := bs[i].Driver().Release(t.Context(), driver.Lease{Key: key, Owner: owner, Mode: driver.Exclusive, Abandoned: true}); err != nil {
			t.Fatalf("member %d: Release(%s): %v", i, owner, err)
		}
	}

	// x holds members 0 and 1: a's first attempt gets member 2 only and
	// gives it back, and that release lags.
	hold(0, "x")
	hold(1, "x")
	ms[2].startLag()
	if _, err := d.TryAcquire(t.Context(), req("a")); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("first attempt: %v; want ErrLocked", err)
	}
	// x lets member 1 go, but not member 0: a's second attempt gets
	// members 1 and 2, where its first grant still stands.
	free(1, "x")
	_, err := d.TryAcquire(t.Context(), req("a"))
	granted := err == nil
	if !granted && !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("second attempt: %v; want a grant or ErrLocked", err)
	}
	// The release lands; x lets member 0 go.
	ms[2].land(t)
	free(0, "x")

	if !granted {
		// The grant of member 2 was in doubt and did not count; a
		// third attempt, with the doubt settled, is granted.
		if _, err := d.TryAcquire(t.Context(), req("a")); err != nil {
			t.Fatalf("third attempt: %v", err)
		}
	}
	// a holds a majority: b must be refused.
	if l, err := d.TryAcquire(t.Context(), req("b")); err == nil {
		t.Fatalf("b was granted %+v while a holds the key (members hold %v, %v, %v)",
			l, bs[0].Holders(key), bs[1].Holders(key), bs[2].Holders(key))
	} else if !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("b: %v; want ErrLocked", err)
	}
}

// TestLateGiveBackRefresh checks that a renewal does not count a member
// whose grant a late give-back may still delete. Member 2's grant for a is
// in doubt (its give-back lags) and carries a token lower than the
// quorum's, so the renewal gives it the quorum's token first (see renew):
// the late give-back, which names the old token, then matches nothing,
// and the renewal counts member 2. Member 1 failing, the renewal holds on
// members 0 and 2, and member 2 still holds a's grant after the give-back
// lands.
func TestLateGiveBackRefresh(t *testing.T) {
	const key, ttl = "k", 10 * time.Second
	d, bs, ms := laggingQuorum(t)
	x := driver.Request{Key: key, Owner: "x", Mode: driver.Exclusive, TTL: ttl}
	a := driver.Request{Key: key, Owner: "a", Mode: driver.Exclusive, TTL: ttl}
	for _, i := range []int{0, 1} {
		if _, err := bs[i].Driver().TryAcquire(t.Context(), x); err != nil {
			t.Fatal(err)
		}
	}
	ms[2].startLag()
	if _, err := d.TryAcquire(t.Context(), a); !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("first attempt: %v; want ErrLocked", err)
	}
	for _, i := range []int{0, 1} {
		if err := bs[i].Driver().Release(t.Context(), driver.Lease{Key: key, Owner: "x", Mode: driver.Exclusive, Abandoned: true}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := d.TryAcquire(t.Context(), a)
	if err != nil {
		t.Fatalf("second attempt: %v", err)
	}
	// Member 1 fails the renewal; member 2 takes the quorum's token.
	ms[1].FailNext(1, nil)
	if _, err := d.Refresh(t.Context(), l); err != nil {
		t.Fatalf("Refresh with member 1 failing: %v", err)
	}
	ms[2].land(t)
	if h := bs[2].Holders(key); len(h) != 1 || h[0].Owner != "a" || h[0].Token != l.Token {
		t.Fatalf("member 2 holds %+v after the late give-back; want a's grant with token %d", h, l.Token)
	}
	if err := d.Release(t.Context(), l); err != nil {
		t.Fatalf("Release: %v", err)
	}
}
