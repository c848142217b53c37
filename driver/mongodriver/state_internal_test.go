package mongodriver

import (
	"errors"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
)

func sreq(owner string, mode driver.Mode, limit, weight int64) driver.Request {
	return driver.Request{Key: "k", Owner: owner, Mode: mode, TTL: time.Second, Limit: limit, Weight: weight}
}

// TestGrantRules checks the state transitions without a server: modes,
// counted holds, re-acquire, expiry by the lower bound of the clock, and
// tokens from the fence and the clock.
func TestGrantRules(t *testing.T) {
	now := span{lo: 1_000_000, hi: 1_000_500}
	v0 := &version{Key: "k"}
	v1, a, err := grant(v0, sreq("a", driver.Exclusive, 0, 0), now)
	if err != nil || v1.V != 1 || a.Token != now.lo || a.End != now.hi+1_000_000 || v1.ID != "1:k" {
		t.Fatalf("first grant: %+v %+v %v", v1, a, err)
	}
	var le *driver.LockedError
	if _, _, err := grant(v1, sreq("b", driver.Shared, 0, 0), now); !errors.As(err, &le) || le.Remaining != time.Second {
		t.Errorf("shared over exclusive: %v; want a LockedError of 1s", err)
	}
	v2, a2, err := grant(v1, sreq("a", driver.Exclusive, 0, 0), span{lo: now.lo + 10, hi: now.hi + 10})
	if err != nil || a2.Token != a.Token || a2.End != a.End+10 || v2.Fence != v1.Fence {
		t.Errorf("re-acquire: %+v %v; want the same token, extended", a2, err)
	}
	late := span{lo: a2.End, hi: a2.End + 500} // a's end has passed by the lower bound
	v3, b, err := grant(v2, sreq("b", driver.Shared, 3, 2), late)
	if err != nil || b.Token != late.lo || len(v3.Holds) != 1 {
		t.Fatalf("after expiry: %+v %+v %v", v3, b, err)
	}
	if _, _, err := grant(v3, sreq("c", driver.Shared, 3, 2), late); !errors.As(err, &le) {
		t.Errorf("counted over the limit: %v; want a LockedError", err)
	}
	var lim *driver.LimitError
	if _, _, err := grant(v3, sreq("c", driver.Shared, 4, 1), late); !errors.As(err, &lim) || lim.Limit != 3 {
		t.Errorf("counted with another limit: %v; want a LimitError of 3", err)
	}
	v4, c, err := grant(v3, sreq("c", driver.Shared, 3, 1), late)
	if err != nil || c.Token != b.Token+1 || v4.Fence != c.Token {
		t.Errorf("counted within the limit: %+v %v; want token fence+1", c, err)
	}
	if _, _, err := renew(v4, driver.Lease{Owner: "c", Mode: driver.Shared, Token: uint64(b.Token)}, late); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("renew with another's token: %v; want ErrNotHeld", err)
	}
	v5, gone, err := drop(v4, driver.Lease{Owner: "b", Mode: driver.Shared, Abandoned: true}, late)
	if err != nil || gone.Owner != "b" || !lacks(v5, []hold{gone}) || lacks(v4, []hold{gone}) {
		t.Errorf("drop: %+v %v", v5, err)
	}
	if !has(v4, c) || has(v5, hold{Owner: "c", Token: c.Token, End: c.End + 1}) {
		t.Errorf("has: the check of a grant in force is wrong")
	}
}

// TestClockBounds checks the bounds of the server's clock kept between
// measurements.
func TestClockBounds(t *testing.T) {
	c := newClock(nil)
	base := c.base
	c.ok, c.at, c.lo, c.hi = true, 0, 5_000, 7_000
	s, ok := c.span(base.Add(500 * time.Millisecond))
	if !ok || s.lo != 500_000+5_000-501 || s.hi != 500_000+7_000+501 {
		t.Errorf("span after 500ms: %+v %v", s, ok)
	}
	if _, ok := c.span(base.Add(clockMaxAge + time.Millisecond)); ok {
		t.Errorf("a measurement older than %v was used", clockMaxAge)
	}
}
