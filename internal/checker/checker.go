// Package checker holds the checkers that fault tests run on every
// history of lock operations:
//
//   - Linearizable: the history fits a lease-lock model in which a held
//     lease may lapse before any step (porcupine). It flags tokens that do
//     not increase, a stale holder's renewal or release succeeding after
//     another grant, and a release by a non-holder.
//   - Holds: the intervals during which clients believed they held the lock
//     (from Lock returning to Unlock or the loss signal) do not overlap when
//     sorted by token, except for clients the test paused on purpose.
//   - Resource: a fenced resource that rejects tokens lower than the highest
//     it has seen, with lost-update accounting.
package checker

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-locker/locker/internal/porcupine"
)

// Kind is the kind of a lock operation.
type Kind uint8

// Operation kinds.
const (
	Acquire Kind = iota
	Renew
	Release
)

// String returns "acquire", "renew" or "release".
func (k Kind) String() string {
	return [...]string{"acquire", "renew", "release"}[k]
}

// An Op is one lock operation as a client saw it, with call and return
// times on one monotonic clock.
type Op struct {
	Client int
	Kind   Kind
	// Token is the token returned by an acquire, or the token of the hold
	// a renew or release was for.
	Token uint64
	// OK reports success. Unknown reports an outcome the client cannot
	// know (a timeout after the request may have been applied); it is
	// meaningful for Renew and Release. A failed Acquire must have left
	// nothing behind (the front-end cleans up before it returns).
	OK, Unknown  bool
	Call, Return time.Duration
}

type state struct {
	holder int    // -1: free
	token  uint64 // the holder's token
	max    uint64 // the highest token ever granted
}

// model is a lease lock whose lease may lapse before any step.
var model = (&porcupine.NondeterministicModel{
	Init: func() []any { return []any{state{holder: -1}} },
	Step: func(s0, in0, _ any) []any {
		s, op := s0.(state), in0.(Op)
		pre := []state{s}
		if s.holder != -1 {
			pre = append(pre, state{holder: -1, max: s.max}) // the lease lapsed
		}
		var next []any
		for _, p := range pre {
			mine := p.holder == op.Client && p.token == op.Token
			switch op.Kind {
			case Acquire:
				switch {
				case !op.OK:
					next = append(next, p)
				case p.holder == -1 && op.Token > p.max:
					next = append(next, state{holder: op.Client, token: op.Token, max: op.Token})
				}
			case Renew:
				if op.Unknown || op.OK == mine {
					next = append(next, p)
				}
			case Release:
				if op.Unknown || (!op.OK && !mine) {
					next = append(next, p)
				}
				if mine && (op.OK || op.Unknown) {
					next = append(next, state{holder: -1, max: p.max})
				}
			}
		}
		return next
	},
	Equal: func(a, b any) bool { return a.(state) == b.(state) },
	DescribeOperation: func(in, _ any) string {
		op := in.(Op)
		res := "ok"
		switch {
		case op.Unknown:
			res = "unknown"
		case !op.OK:
			res = "failed"
		}
		return fmt.Sprintf("client %d %s token %d: %s", op.Client, op.Kind, op.Token, res)
	},
}).ToModel()

// Linearizable checks ops (all on one key) against the lease-lock model.
func Linearizable(ops []Op, timeout time.Duration) porcupine.CheckResult {
	hist := make([]porcupine.Operation, len(ops))
	for i, op := range ops {
		hist[i] = porcupine.Operation{ClientId: op.Client, Input: op, Call: int64(op.Call), Output: nil, Return: int64(op.Return)}
	}
	return porcupine.CheckOperationsTimeout(model, hist, timeout)
}

// A Hold is the interval during which a client believed it held the lock.
type Hold struct {
	Client          int
	Token           uint64
	Acquired, Ended time.Duration // Lock returned; Unlock called or loss signalled
	Paused          bool          // the test paused this client past its lease
	Shared          bool          // a shared (read) hold: it may overlap other shared holds
	Weight          int64         // the permits of a semaphore hold (see Permits), or 0
}

// Permits returns the violations among the semaphore holds hs (those with
// a Weight): moments at which the holds whose clients believed they held
// them weigh more than limit. Holds of paused clients are left out, as in
// Holds: a fenced resource, not the belief, is what protects against them.
func Permits(hs []Hold, limit int64) []error {
	type event struct {
		at    time.Duration
		delta int64
		h     Hold
	}
	var evs []event
	for _, h := range hs {
		if h.Weight == 0 || h.Paused {
			continue
		}
		evs = append(evs, event{h.Acquired, h.Weight, h}, event{h.Ended, -h.Weight, h})
	}
	// Ends before beginnings at the same instant: a hold that ends when
	// another begins does not overlap it.
	slices.SortFunc(evs, func(a, b event) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.delta, b.delta)
	})
	var errs []error
	var held int64
	for _, ev := range evs {
		held += ev.delta
		if ev.delta > 0 && held > limit {
			errs = append(errs, fmt.Errorf("%d permits of %d held at %v, when client %d token %d took %d",
				held, limit, ev.at, ev.h.Client, ev.h.Token, ev.h.Weight))
		}
	}
	return errs
}

// Holds returns the violations among hs: tokens granted twice, tokens out
// of acquisition order, and belief intervals that overlap: a hold must
// begin after every hold with a lower token has ended, unless both are
// shared or the earlier one's client was paused.
func Holds(hs []Hold) []error {
	hs = slices.Clone(hs)
	slices.SortStableFunc(hs, func(a, b Hold) int { return cmp.Compare(a.Token, b.Token) })
	var errs []error
	// The latest-ending earlier hold that was not paused, among all and
	// among the exclusive ones.
	var last, lastExcl *Hold
	for i := range hs {
		c := &hs[i]
		if i > 0 {
			p := hs[i-1]
			if c.Token == p.Token {
				errs = append(errs, fmt.Errorf("token %d granted twice (clients %d and %d)", c.Token, p.Client, c.Client))
			} else if c.Acquired < p.Acquired && !(c.Shared && p.Shared) {
				errs = append(errs, fmt.Errorf("token %d (client %d) acquired before token %d (client %d)", c.Token, c.Client, p.Token, p.Client))
			}
		}
		p := last
		if c.Shared {
			p = lastExcl
		}
		if p != nil && p.Token != c.Token && p.Ended > c.Acquired {
			errs = append(errs, fmt.Errorf("holds overlap by %v: client %d token %d until %v, client %d token %d from %v",
				p.Ended-c.Acquired, p.Client, p.Token, p.Ended, c.Client, c.Token, c.Acquired))
		}
		if c.Paused {
			continue
		}
		if last == nil || c.Ended > last.Ended {
			last = c
		}
		if !c.Shared && (lastExcl == nil || c.Ended > lastExcl.Ended) {
			lastExcl = c
		}
	}
	return errs
}

// A Resource is a fenced list, updated read-modify-write: a critical
// section reads it, works, and writes it back with an item appended. Both
// the read and the write carry the holder's fencing token; each is refused
// when the token is lower than the highest the resource has seen, and an
// accepted read raises the highest token, so that a stale holder's write
// cannot overwrite a list its successor has read. With that rule no
// acknowledged item is ever lost, even when two clients believe they hold
// the lock at once.
type Resource struct {
	mu       sync.Mutex
	highest  uint64
	items    []int
	rejected []Rejection
}

// A Rejection records a read or write the resource refused.
type Rejection struct {
	Client  int
	Token   uint64
	Highest uint64
	Write   bool
}

func (r *Resource) admitLocked(client int, token uint64, write bool) bool {
	if token == 0 || token < r.highest {
		r.rejected = append(r.rejected, Rejection{client, token, r.highest, write})
		return false
	}
	r.highest = token
	return true
}

// Read returns a copy of the list if token is admitted.
func (r *Resource) Read(client int, token uint64) ([]int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.admitLocked(client, token, false) {
		return nil, false
	}
	return slices.Clone(r.items), true
}

// Write replaces the list if token is admitted, and reports whether it
// was: an accepted write acknowledges every item in items.
func (r *Resource) Write(client int, token uint64, items []int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.admitLocked(client, token, true) {
		return false
	}
	r.items = slices.Clone(items)
	return true
}

// Lost returns the acknowledged values missing from the list.
func (r *Resource) Lost(acked []int) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var lost []int
	for _, v := range acked {
		if !slices.Contains(r.items, v) {
			lost = append(lost, v)
		}
	}
	return lost
}

// Rejected returns the reads and writes the resource refused.
func (r *Resource) Rejected() []Rejection {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.rejected)
}
