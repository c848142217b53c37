package quorumdriver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
	"github.com/go-locker/locker/driver/quorumdriver"
	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/go-locker/locker/internal/drivertest"
)

func owner() string { return drivertest.Owner() }

func req(key string, ttl time.Duration) driver.Request {
	return driver.Request{Key: key, Owner: owner(), Mode: driver.Exclusive, TTL: ttl}
}

// TestWriteBackOrdersMajorities: members whose counters differ, and
// majorities that change from grant to grant (one member cut off in
// turn), still give strictly increasing tokens, because each grant's token
// is written back to the members that granted it.
func TestWriteBackOrdersMajorities(t *testing.T) {
	ctx := ctxT(t)
	bs := newBackends(3)
	mk := memQuorum(bs)
	d := mk(t)
	ms := memOf(t, d)
	key := "k"
	// Member 0's counter runs far ahead of the others'.
	r0 := req(key, time.Second)
	l0, err := ms[0].TryAcquire(ctx, r0)
	if err != nil {
		t.Fatal(err)
	}
	if err := raiseFloor(ms[0], ctx, l0, 1000); err != nil {
		t.Fatal(err)
	}
	if err := ms[0].Release(ctx, driver.Lease{Key: key, Owner: r0.Owner, Mode: driver.Exclusive, Abandoned: true}); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for i := range 9 {
		cut := ms[i%3]
		cut.Block()
		l, err := d.TryAcquire(ctx, req(key, time.Second))
		cut.Unblock()
		if err != nil {
			t.Fatalf("grant %d (member %d cut off): %v", i, i%3, err)
		}
		if l.Token <= last {
			t.Fatalf("grant %d (member %d cut off): token %d after %d", i, i%3, l.Token, last)
		}
		if i == 1 && l.Token <= 1000 {
			t.Fatalf("grant %d without member 0: token %d, want > 1000 (member 0's counter)", i, l.Token)
		}
		last = l.Token
		if err := d.Release(ctx, l); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
	}
}

// TestRefusesMemberWithoutFloor: New refuses a member that cannot take a
// token floor.
func TestRefusesMemberWithoutFloor(t *testing.T) {
	type plain struct{ driver.Driver }
	_, err := quorumdriver.New([]driver.Driver{memdriver.New(), plain{memdriver.New()}, memdriver.New()}, nil)
	if !errors.Is(err, quorumdriver.ErrNoTokenFloor) {
		t.Fatalf("New with a member lacking TokenFloor: %v, want ErrNoTokenFloor", err)
	}
}

// testTokenFloor checks token floors (driver.Request.MinToken) on one
// member driver: a floor far
// above its tokens becomes the holder's token (a re-acquire returns it), its
// release keeps it, and the next grant exceeds it; a floor raised for an
// owner that does not hold the key fails with ErrNotHeld.
func testTokenFloor(t *testing.T, m driver.Driver, floor func(tok uint64) uint64) {
	ctx := ctxT(t)
	if !driver.CapabilitiesOf(m).TokenFloor {
		t.Fatalf("%T does not report TokenFloor", m)
	}
	f := m
	key := "floor/" + t.Name()
	r := req(key, 10*time.Second)
	l, err := m.TryAcquire(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	fl := floor(l.Token)
	if err := raiseFloor(f, ctx, l, fl); err != nil {
		t.Fatalf("token floor (%d) by the holder: %v", fl, err)
	}
	again, err := m.TryAcquire(ctx, r)
	if err != nil || again.Token != fl {
		t.Fatalf("re-acquire after token floor (%d) = token %d, %v; want the floor", fl, again.Token, err)
	}
	if err := m.Release(ctx, again); err != nil {
		t.Fatal(err)
	}
	l2, err := m.TryAcquire(ctx, req(key, 10*time.Second))
	if err != nil || l2.Token <= fl {
		t.Fatalf("grant after the floor's hold was released = token %d, %v; want > %d", l2.Token, err, fl)
	}
	fl2 := floor(l2.Token)
	if err := raiseFloor(f, ctx, driver.Lease{Key: key, Owner: owner(), Mode: driver.Exclusive}, fl2); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("token floor by a non-holder: %v, want ErrNotHeld", err)
	}
	if err := m.Release(ctx, l2); err != nil {
		t.Fatal(err)
	}
	sr := req(key, 10*time.Second)
	sr.Mode = driver.Shared
	l3, err := m.TryAcquire(ctx, sr)
	if err != nil || l3.Token <= l2.Token {
		t.Fatalf("grant after token %d = token %d, %v; want greater", l2.Token, l3.Token, err)
	}
	fl3 := floor(l3.Token)
	if err := raiseFloor(f, ctx, l3, fl3); err != nil {
		t.Fatalf("token floor (%d) by a shared holder: %v", fl3, err)
	}
	if again, err = m.TryAcquire(ctx, sr); err != nil || again.Token != fl3 {
		t.Fatalf("shared re-acquire after token floor (%d) = token %d, %v; want the floor", fl3, again.Token, err)
	}
	if err := m.Release(ctx, again); err != nil {
		t.Fatal(err)
	}
	l4, err := m.TryAcquire(ctx, req(key, 10*time.Second))
	if err != nil || l4.Token <= fl3 {
		t.Fatalf("grant after a shared hold with floor %d = token %d, %v; want greater", fl3, l4.Token, err)
	}
	_ = m.Release(ctx, l4)
}

func TestTokenFloorMem(t *testing.T) {
	testTokenFloor(t, memdriver.New(), func(tok uint64) uint64 { return tok + 1000 })
}

// TestTokenFloorRedis: on Redis, whose tokens are the server's clock in
// microseconds, a floor an hour ahead of the clock (another member's clock
// running ahead) is kept until the clock passes it.
func TestTokenFloorRedis(t *testing.T) {
	addrs := poolAddrs(t, 1)
	c := memberClient(addrs[0])
	defer c.Close()
	m, err := redisdriver.New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	testTokenFloor(t, m, func(tok uint64) uint64 { return tok + uint64(time.Hour/time.Microsecond) })
}

// floorless is a member whose token write-backs fail.
type floorless struct{ *memdriver.Driver }

func (f floorless) TryAcquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	if req.MinToken != 0 {
		return driver.Lease{}, errors.New("write-back refused")
	}
	return f.Driver.TryAcquire(ctx, req)
}

// TestGiveBackAfterWriteBack: an attempt that wrote its token back to
// some members but not to a majority gives every grant back, including
// those whose token the write-back raised, so that no member keeps a hold
// that nobody reported. A give-back that named the member's first token
// found the hold's token changed, was answered "not held", and left the
// key blocked for others until the hold expired.
func TestGiveBackAfterWriteBack(t *testing.T) {
	ctx := ctxT(t)
	const key = "k"
	bs := newBackends(5)
	ms := make([]driver.Driver, len(bs))
	for i, b := range bs {
		ms[i] = b.Driver()
	}
	ms[1] = floorless{bs[1].Driver()}
	// Member 2's counter runs far ahead: members 0 and 1 grant lower
	// tokens and are written back to.
	r0 := req(key, time.Second)
	l0, err := ms[2].TryAcquire(ctx, r0)
	if err != nil {
		t.Fatal(err)
	}
	if err := raiseFloor(ms[2], ctx, l0, 1000); err != nil {
		t.Fatal(err)
	}
	l0.Token = 1000 // the hold took the floor
	if err := ms[2].Release(ctx, l0); err != nil {
		t.Fatal(err)
	}
	// Another owner holds members 3 and 4.
	for _, m := range ms[3:] {
		if _, err := m.TryAcquire(ctx, req(key, time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	d, err := quorumdriver.New(ms, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := d.TryAcquire(ctx, req(key, time.Minute)); err == nil {
		t.Fatalf("granted (token %d) with 2 of 5 members holding the token", l.Token)
	}
	for i, m := range ms[:3] {
		st, err := m.(driver.Inspector).Inspect(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Holders) != 0 {
			t.Errorf("member %d still holds the key after the attempt gave it back: %+v", i, st.Holders)
		}
	}
}

// TestRenewalRaisesLowMember: the write-back goes to as few members as a
// majority takes; a member left holding the grant with its own lower
// token takes the quorum's at the first renewal, so that after it every
// member holds the grant with the quorum's token, and a member lost
// later does not cost the hold.
func TestRenewalRaisesLowMember(t *testing.T) {
	ctx := ctxT(t)
	bs := newBackends(3)
	d := memQuorum(bs)(t)
	ms := memOf(t, d)
	key := "k"
	// Members 0 and 1 have granted the key before: member 2's counter is
	// behind theirs.
	for _, m := range ms[:2] {
		r := req(key, time.Second)
		if _, err := m.TryAcquire(ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := m.Release(ctx, driver.Lease{Key: key, Owner: r.Owner, Mode: driver.Exclusive, Abandoned: true}); err != nil {
			t.Fatal(err)
		}
	}
	before := bs[2].Stats().TryAcquire
	l, err := d.TryAcquire(ctx, req(key, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if got := bs[2].Stats().TryAcquire - before; got != 1 {
		t.Fatalf("member 2 got %d TryAcquire calls for the grant; want 1 (no write-back: members 0 and 1 hold the token)", got)
	}
	if h := bs[2].Holders(key); len(h) != 1 || h[0].Token >= l.Token {
		t.Fatalf("member 2 holds %+v; want the grant with a token below %d", h, l.Token)
	}
	if _, err := d.Refresh(ctx, l); err != nil {
		t.Fatalf("first renewal: %v", err)
	}
	for i, b := range bs {
		if h := b.Holders(key); len(h) != 1 || h[0].Owner != l.Owner || h[0].Token != l.Token {
			t.Fatalf("after the first renewal member %d holds %+v; want the grant with token %d", i, h, l.Token)
		}
	}
	// Member 0 cut off: members 1 and 2 renew.
	ms[0].Block()
	defer ms[0].Unblock()
	if _, err := d.Refresh(ctx, l); err != nil {
		t.Fatalf("renewal without member 0: %v", err)
	}
}
