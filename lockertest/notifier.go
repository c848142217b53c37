package lockertest

import "github.com/go-locker/locker/driver"

// notifierOf returns d's driver.Notifier, unless d says it does not
// notify on its backend (a SupportsNotify method that reports false, as
// sqldriver's Driver has on MySQL), as package locker decides.
func notifierOf(d driver.Driver) (driver.Notifier, bool) {
	n, ok := d.(driver.Notifier)
	if s, has := d.(interface{ SupportsNotify() bool }); ok && has && !s.SupportsNotify() {
		return nil, false
	}
	return n, ok
}
