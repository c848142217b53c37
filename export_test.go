package locker

import "github.com/go-locker/locker/driver"

// DefaultClients returns how many default Clients (shared.go) are
// registered.
func DefaultClients() int { return defaultClients() }

// DefaultClientOf returns the registered default Client of d, or nil.
func DefaultClientOf(d driver.Driver) *Client {
	defaults.mu.Lock()
	defer defaults.mu.Unlock()
	return defaults.m[d]
}
