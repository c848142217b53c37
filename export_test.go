package locker

import "github.com/go-locker/locker/driver"

// DefaultClients returns how many default Clients (shared.go) are in use.
func DefaultClients() int { return defaultClientsInUse() }

// DefaultClientOf returns the default Client of d if it is in use, or
// nil.
func DefaultClientOf(d driver.Driver) *Client {
	defaults.mu.Lock()
	defer defaults.mu.Unlock()
	if e := defaults.m[d]; e != nil {
		return e.strong
	}
	return nil
}

// DefaultEntries returns how many drivers the registry has an entry for,
// in use or idle.
func DefaultEntries() int {
	defaults.mu.Lock()
	defer defaults.mu.Unlock()
	return len(defaults.m)
}
