package locker

import (
	"errors"
	"fmt"
	"sync"
)

// A Token is the fencing token of a hold: every grant of a key gets a token
// strictly greater than every token granted before it for that key (by the
// same backend, while it keeps its data), and a reentrant re-acquire keeps
// its token. Token 0 is never granted; methods return it when nothing is
// held.
//
// A lease cannot stop a paused or partitioned holder from acting after its
// lease ran out, but the resource it writes to can: pass the token with
// every write and have the resource reject tokens lower than the highest
// it has seen. See Guard for an in-process resource, and the package
// documentation for SQL and compare-in-transaction forms.
type Token uint64

// ErrStaleToken means a write carried a fencing token lower than one the
// resource has already seen: its writer's hold has been superseded.
var ErrStaleToken = errors.New("stale fencing token")

// A StaleTokenError is returned by Guard when a token is rejected. It
// matches ErrStaleToken with errors.Is.
type StaleTokenError struct {
	Resource string
	Token    Token // the rejected token
	Highest  Token // the highest token the guard has admitted for Resource
}

// Error implements error.
func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("locker: resource %q: token %d is lower than %d: %v", e.Resource, e.Token, e.Highest, ErrStaleToken)
}

// Is reports whether target is ErrStaleToken.
func (e *StaleTokenError) Is(target error) bool { return target == ErrStaleToken }

// A Guard is the resource side of fencing for resources that live in one
// process: it admits a write only if its token is at least the highest
// token it has admitted for that resource. Equal tokens are admitted, so
// the current holder may write many times.
//
// Embed a Guard in the type that owns the resource, or keep one per
// process. The zero value is ready to use. A Guard must not be copied after
// first use.
type Guard struct {
	mu      sync.Mutex
	highest map[string]Token
}

// Admit records t for resource if it is not stale and reports a
// *StaleTokenError otherwise. Token 0 is always stale, because no hold has
// it.
func (g *Guard) Admit(resource string, t Token) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.admitLocked(resource, t)
}

func (g *Guard) admitLocked(resource string, t Token) error {
	hi := g.highest[resource]
	if t == 0 || t < hi {
		return &StaleTokenError{Resource: resource, Token: t, Highest: hi}
	}
	if g.highest == nil {
		g.highest = make(map[string]Token)
	}
	g.highest[resource] = t
	return nil
}

// Do runs write if t is admitted for resource, with the guard locked, so
// that no write with a higher token can be admitted while write runs. It
// returns the *StaleTokenError or write's error.
func (g *Guard) Do(resource string, t Token, write func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.admitLocked(resource, t); err != nil {
		return err
	}
	return write()
}

// Highest returns the highest token admitted for resource, or 0.
func (g *Guard) Highest(resource string) Token {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.highest[resource]
}
