package quorumdriver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
	"github.com/go-locker/locker/driver/quorumdriver"
)

// handedOff is a member whose grants began before the request that
// returns them, by ago, as a handoff to a queued owner does: the key was
// handed over when another owner released it, for as long as the owner's
// queue entry lived, and the grant is returned from the owner's next
// request (Lease.Start says when it began). Its part ends ago earlier
// than a grant made by the request would.
type handedOff struct {
	*memdriver.Driver
	ago time.Duration
}

func (m handedOff) TryAcquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	began := time.Now().Add(-m.ago)
	short := req
	short.TTL -= m.ago
	l, err := m.Driver.TryAcquire(ctx, short)
	if err != nil {
		return l, err
	}
	l.TTL, l.Start = req.TTL, began
	return l, nil
}

// TestHandoffStart checks that a grant counts from when the members'
// grants began, not from the attempt, when they began before it. A
// quorum that counted a handoff from its attempt believed it held the key
// for as long as the queue entry had lived after the members' parts
// expired: the fault matrix saw a successor's hold overlap it by 53 ms
// (TTL 400ms; every member had handed the key over 295 ms before its
// queue entry's end).
func TestHandoffStart(t *testing.T) {
	const key, ttl, ago = "k", time.Second, 600 * time.Millisecond
	ctx := ctxT(t)
	for _, c := range []struct {
		name  string
		agos  []time.Duration // of each member
		fresh bool            // a majority granted at the attempt
	}{
		{"all handed off", []time.Duration{ago, ago, ago}, false},
		{"a majority handed off", []time.Duration{ago, 0, ago}, false},
		{"one handed off", []time.Duration{ago, 0, 0}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			bs := newBackends(3)
			members := make([]driver.Driver, len(bs))
			for i, b := range bs {
				members[i] = handedOff{b.Driver(), c.agos[i]}
			}
			d, err := quorumdriver.New(members, nil)
			if err != nil {
				t.Fatal(err)
			}
			before := time.Now()
			first, err := d.TryAcquire(ctx, req(key, ttl))
			if err != nil {
				t.Fatal(err)
			}
			if c.fresh && first.Start.Before(before.Add(-quorumdriver.Drift(ttl))) {
				t.Errorf("Start %v before the attempt, though a majority granted at the attempt", before.Sub(first.Start))
			}
			valid := first.Start.Add(first.TTL) // the front-end's bound
			// Another owner asks until the members' parts expire.
			for {
				l, err := d.TryAcquire(ctx, req(key, ttl))
				got := time.Now() // the grant exists by now
				if err == nil {
					if got.Before(valid) {
						t.Fatalf("another owner got the key (token %d) %v before the first grant's validity ended (it counted from %v after the call)",
							l.Token, valid.Sub(got), first.Start.Sub(before))
					}
					return
				}
				if !errors.Is(err, driver.ErrLocked) {
					t.Fatal(err)
				}
				if time.Now().After(valid.Add(ttl)) {
					t.Fatalf("the key is still refused %v after the first grant's validity ended: %v", ttl, err)
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}
