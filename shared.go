package locker

import (
	"reflect"
	"runtime"
	"sync"
	"weak"

	"github.com/go-locker/locker/driver"
)

// The handles of NewMutex, NewRWMutex and NewReentrantMutex lock through
// the default Client of their driver: one Client per driver value in the
// process, so that such handles made anywhere share what the handles of
// one Client share (the key's line in the process, the batched renewals,
// the background cleanups).
//
// The registry keeps a default Client alive only while it is in use: each
// lock call through it pins it until the call returns, each hold until it
// ends, and each background cleanup until it is done. When the last pin
// goes, its watchdog timer stops and the registry keeps only a weak
// pointer to it: the next lock call takes it up again if the garbage
// collector has not run meanwhile (a handle locked and unlocked in a loop
// does not make a Client per pair), and otherwise the collector frees it
// and its registry entry, so that nothing of it or of its handles stays.
// The handles resolve their Client at each lock call, so that handles made
// at different times share the Client in use.
var defaults = struct {
	mu sync.Mutex
	m  map[any]*defaultEntry
}{m: make(map[any]*defaultEntry)}

// A defaultEntry is the registry state of a default Client, guarded by
// defaults.mu.
type defaultEntry struct {
	key    any     // the driver value the Client is registered under
	strong *Client // set while pinned
	weak   weak.Pointer[Client]
	pins   int
	own    bool // not in the registry (ownClient)
}

// pinDefault returns the default Client of d, made if need be, pinned:
// the caller unpins it once. A driver value that cannot be a map key (its
// dynamic type is not comparable) gets a Client of its own for the call,
// which no other handle shares.
func pinDefault(d driver.Driver) *Client {
	if d == nil || !reflect.TypeOf(d).Comparable() {
		return ownClient(d)
	}
	defaults.mu.Lock()
	defer defaults.mu.Unlock()
	e, ok := lookupDefault(d)
	if !ok {
		return ownClient(d) // a comparable type holding an incomparable value
	}
	if e != nil && e.strong == nil {
		e.strong = e.weak.Value() // nil if collected: its cleanup is due
	}
	if e == nil || e.strong == nil {
		c := New(d)
		e = &defaultEntry{key: d, strong: c, weak: weak.Make(c)}
		c.dflt = e
		defaults.m[d] = e
		runtime.AddCleanup(c, dropDefault, e)
	}
	e.pins++
	return e.strong
}

// dropDefault removes e from the registry once its Client is collected,
// unless a new Client has taken its place.
func dropDefault(e *defaultEntry) {
	defaults.mu.Lock()
	defer defaults.mu.Unlock()
	if cur, ok := lookupDefault(e.key); ok && cur == e {
		delete(defaults.m, e.key)
	}
}

// ownClient returns a pinned Client of its own for d, in no registry.
func ownClient(d driver.Driver) *Client {
	c := New(d)
	c.dflt = &defaultEntry{pins: 1, own: true}
	return c
}

// lookupDefault looks d up in the registry; ok is false if d cannot be a
// map key after all (an interface field holding an incomparable value).
// defaults.mu is held.
func lookupDefault(d any) (e *defaultEntry, ok bool) {
	defer func() {
		if recover() != nil {
			e, ok = nil, false
		}
	}()
	return defaults.m[d], true
}

// pin pins a default Client once more, for work that outlives the lock
// call that pinned it (a background cleanup). Other Clients are not
// pinned.
func (c *Client) pin() {
	if c.dflt == nil {
		return
	}
	defaults.mu.Lock()
	c.dflt.pins++
	defaults.mu.Unlock()
}

// unpin undoes a pin. The last unpin of a default Client leaves it to the
// registry's weak pointer and stops its watchdog timer, which no hold
// needs any more and which would keep the Client alive until it fires.
func (c *Client) unpin() {
	if c.dflt == nil {
		return
	}
	defaults.mu.Lock()
	c.dflt.pins--
	last := c.dflt.pins == 0
	if last {
		c.dflt.strong = nil
	}
	defaults.mu.Unlock()
	if last {
		c.wd.stopIdle()
	}
}

// defaultClientsInUse returns how many default Clients are pinned, for
// tests.
func defaultClientsInUse() int {
	defaults.mu.Lock()
	defer defaults.mu.Unlock()
	n := 0
	for _, e := range defaults.m {
		if e.strong != nil {
			n++
		}
	}
	return n
}

// peekDefault returns the default Client of d if there is one now, without
// making one or pinning it, or nil: for the default error handler of the
// handles of d, which logs runs of errors per Client.
func peekDefault(d driver.Driver) *Client {
	if d == nil || !reflect.TypeOf(d).Comparable() {
		return nil
	}
	defaults.mu.Lock()
	defer defaults.mu.Unlock()
	e, ok := lookupDefault(d)
	if !ok || e == nil {
		return nil
	}
	if e.strong != nil {
		return e.strong
	}
	return e.weak.Value()
}
