package locker

import (
	"reflect"
	"sync"

	"github.com/go-locker/locker/driver"
)

// The handles of NewMutex, NewRWMutex and NewReentrantMutex lock through
// the default Client of their driver: one Client per driver value in the
// process, so that such handles made anywhere share what the handles of
// one Client share (the key's line in the process, the batched renewals,
// the background cleanups).
//
// A default Client lives while it is in use: each lock call through it
// pins it until the call returns, each hold until it ends, and each
// background cleanup until it is done. When the last pin goes, the Client
// leaves the registry and its watchdog timer stops, so that nothing of it
// or of its handles stays alive; the next lock call makes a new one. The
// handles resolve their Client at each lock call, so that handles made at
// different times share the Client that is in use.
var defaults = struct {
	mu sync.Mutex
	m  map[any]*Client
}{m: make(map[any]*Client)}

// defaultPins is the registry state of a default Client, guarded by
// defaults.mu.
type defaultPins struct {
	key  any // the driver value the Client is registered under
	pins int
	own  bool // not in the registry (ownClient)
}

// pinDefault returns the default Client of d, made if need be, pinned:
// the caller unpins it once. A driver value that cannot be a map key (its
// dynamic type is not comparable) gets a Client of its own, which the
// unpin drops.
func pinDefault(d driver.Driver) *Client {
	if d == nil || !reflect.TypeOf(d).Comparable() {
		return New(d)
	}
	defaults.mu.Lock()
	defer defaults.mu.Unlock()
	c, ok := lookupDefault(d)
	if !ok {
		return ownClient(d) // a comparable type holding an incomparable value
	}
	if c == nil {
		c = New(d)
		c.pins = &defaultPins{key: d}
		defaults.m[d] = c
	}
	c.pins.pins++
	return c
}

// ownClient returns a pinned Client of its own for d, in no registry.
func ownClient(d driver.Driver) *Client {
	c := New(d)
	c.pins = &defaultPins{pins: 1, own: true}
	return c
}

// lookupDefault looks d up in the registry; ok is false if d cannot be a
// map key after all (an interface field holding an incomparable value).
// defaults.mu is held.
func lookupDefault(d driver.Driver) (c *Client, ok bool) {
	defer func() {
		if recover() != nil {
			c, ok = nil, false
		}
	}()
	return defaults.m[d], true
}

// pin pins a default Client once more, for work that outlives the lock
// call that pinned it (a background cleanup). Other Clients are not
// pinned.
func (c *Client) pin() {
	if c.pins == nil {
		return
	}
	defaults.mu.Lock()
	c.pins.pins++
	defaults.mu.Unlock()
}

// unpin undoes a pin. The last unpin of a default Client drops it from the
// registry and stops its watchdog timer, which no hold needs any more.
func (c *Client) unpin() {
	if c.pins == nil {
		return
	}
	defaults.mu.Lock()
	c.pins.pins--
	last := c.pins.pins == 0
	if last && !c.pins.own {
		delete(defaults.m, c.pins.key)
	}
	defaults.mu.Unlock()
	if last {
		c.wd.stopIdle()
	}
}

// defaultClients returns how many default Clients are registered, for
// tests.
func defaultClients() int {
	defaults.mu.Lock()
	defer defaults.mu.Unlock()
	return len(defaults.m)
}
