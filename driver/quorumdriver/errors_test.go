package quorumdriver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
	"github.com/go-locker/locker/driver/quorumdriver"
)

// scripted is a member that answers every call with err (a grant, a
// renewal or a release when err is nil).
type scripted struct{ err error }

func (s scripted) TryAcquire(_ context.Context, req driver.Request) (driver.Lease, error) {
	if s.err != nil {
		return driver.Lease{}, s.err
	}
	if req.MinToken != 0 { // a token floor
		return driver.Lease{Key: req.Key, Owner: req.Owner, Mode: req.Mode, Token: req.MinToken}, nil
	}
	return driver.Lease{Key: req.Key, Owner: req.Owner, Mode: req.Mode, TTL: req.TTL, Token: 1}, nil
}

func (s scripted) Refresh(_ context.Context, l driver.Lease) (driver.Lease, error) {
	if s.err != nil {
		return driver.Lease{}, s.err
	}
	return l, nil
}

func (s scripted) Release(context.Context, driver.Lease) error { return s.err }

func (s scripted) Capabilities() driver.Capabilities {
	return driver.Capabilities{TokenFloor: true}
}

// scriptedQuorum returns a quorum driver over members that answer every
// call with answers[i].
func scriptedQuorum(t *testing.T, answers []error) driver.Driver {
	t.Helper()
	members := make([]driver.Driver, len(answers))
	for i, a := range answers {
		members[i] = scripted{a}
	}
	d, err := quorumdriver.New(members, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

var (
	errTransient = errors.New("connection reset")
	errPermanent = driver.Permanent(errors.New("client closed"))
	errNotHeld   = &driverkit.OpError{Driver: "scripted", Op: "release", Key: "k", Err: driver.ErrNotHeld}
	errLocked    = &driverkit.OpError{Driver: "scripted", Op: "acquire", Key: "k", Err: &driver.LockedError{Remaining: time.Second}}
)

// TestMemberErrorsDoNotDecide checks that what one member answered does
// not become what the quorum answered: a failed call's error matches
// driver.ErrNotHeld, driver.ErrLocked or driver.IsPermanent only when the
// quorum decided so. A cleanup that took a minority's "not held" for the
// quorum's stopped early and left the other members' queue entries to
// block the key until they expired.
func TestMemberErrorsDoNotDecide(t *testing.T) {
	lease := driver.Lease{Key: "k", Owner: "o", Mode: driver.Exclusive, TTL: time.Second, Token: 1}
	req := driver.Request{Key: "k", Owner: "o", Mode: driver.Exclusive, TTL: time.Second}
	calls := map[string]func(driver.Driver) error{
		"Release": func(d driver.Driver) error { return d.Release(t.Context(), lease) },
		"Refresh": func(d driver.Driver) error { _, err := d.Refresh(t.Context(), lease); return err },
		"TryAcquire": func(d driver.Driver) error {
			l, err := d.TryAcquire(t.Context(), req)
			if err == nil {
				t.Errorf("TryAcquire granted %+v", l)
			}
			return err
		},
	}
	tests := []struct {
		call    string
		answers []error
		notHeld bool
		locked  bool // a refusal: a *driver.LockedError, not the members' answers
		perm    bool
	}{
		// Two of five answered: no majority knows anything.
		{call: "Release", answers: []error{nil, errNotHeld, errTransient, errTransient, errTransient}},
		{call: "Release", answers: []error{errPermanent, errNotHeld, errNotHeld, errTransient, errTransient}},
		{call: "Release", answers: []error{errPermanent, errPermanent, errPermanent, errNotHeld, errNotHeld}, perm: true},
		{call: "Release", answers: []error{errNotHeld, errNotHeld, errNotHeld, errTransient, errTransient}, notHeld: true},
		// Expired on a majority; one member, whose grant came later,
		// still held its part: the lease was not held.
		{call: "Release", answers: []error{nil, errNotHeld, errNotHeld, errNotHeld, errTransient}, notHeld: true},
		{call: "Refresh", answers: []error{nil, nil, errNotHeld, errNotHeld, errTransient}},
		{call: "Refresh", answers: []error{nil, errNotHeld, errNotHeld, errNotHeld, errTransient}, notHeld: true},
		{call: "Refresh", answers: []error{nil, nil, errPermanent, errPermanent, errTransient}},
		{call: "TryAcquire", answers: []error{errTransient, errTransient, errTransient, errPermanent, errNotHeld}},
		{call: "TryAcquire", answers: []error{nil, nil, errLocked, errTransient, errTransient}, locked: true},
	}
	for _, tt := range tests {
		err := calls[tt.call](scriptedQuorum(t, tt.answers))
		if err == nil {
			t.Errorf("%s with members answering %v = nil; want an error", tt.call, tt.answers)
			continue
		}
		var me quorumdriver.MemberErrors
		if !tt.locked && (!errors.As(err, &me) || len(me) != len(tt.answers)-countNil(tt.answers)) {
			t.Errorf("%s with members answering %v = %v; want quorumdriver.MemberErrors listing each failed member", tt.call, tt.answers, err)
		}
		if got := errors.Is(err, driver.ErrNotHeld); got != tt.notHeld {
			t.Errorf("%s with members answering %v = %v; errors.Is(ErrNotHeld) = %v, want %v", tt.call, tt.answers, err, got, tt.notHeld)
		}
		if got := errors.Is(err, driver.ErrLocked); got != tt.locked {
			t.Errorf("%s with members answering %v = %v; errors.Is(ErrLocked) = %v, want %v", tt.call, tt.answers, err, got, tt.locked)
		}
		if got := driver.IsPermanent(err); got != tt.perm {
			t.Errorf("%s with members answering %v = %v; driver.IsPermanent = %v, want %v", tt.call, tt.answers, err, got, tt.perm)
		}
	}
}

func countNil(errs []error) int {
	n := 0
	for _, err := range errs {
		if err == nil {
			n++
		}
	}
	return n
}

// TestReleaseTally checks when Release succeeds: a majority known not to
// hold the lease any more, one of them through this call, and fewer than
// a majority answering that they no longer held it.
func TestReleaseTally(t *testing.T) {
	lease := driver.Lease{Key: "k", Owner: "o", Mode: driver.Exclusive, TTL: time.Second, Token: 1}
	for _, tt := range []struct {
		answers []error
		want    error // nil, driver.ErrNotHeld or quorumdriver.ErrTooFewMembers
	}{
		{[]error{nil, nil, nil, nil, nil}, nil},
		{[]error{nil, nil, nil, errNotHeld, errNotHeld}, nil},                   // held by the 3 that granted it
		{[]error{nil, nil, errNotHeld, errTransient, errTransient}, nil},        // a retry after a partial release
		{[]error{nil, errNotHeld, errNotHeld, errTransient, errTransient}, nil}, // the same
		{[]error{nil, nil, errTransient, errTransient, errTransient}, quorumdriver.ErrTooFewMembers},
		{[]error{nil, errNotHeld, errNotHeld, errNotHeld, errNotHeld}, driver.ErrNotHeld},
		{[]error{nil, nil, errNotHeld, errNotHeld, errNotHeld}, driver.ErrNotHeld},
		{[]error{errNotHeld, errNotHeld, errNotHeld, errNotHeld, errNotHeld}, driver.ErrNotHeld},
	} {
		err := scriptedQuorum(t, tt.answers).Release(t.Context(), lease)
		if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
			t.Errorf("Release with members answering %v = %v; want %v", tt.answers, err, tt.want)
		}
	}
}
