package sqldriver

import "context"

// LockID is lockID, for tests that take a key's advisory lock themselves.
var LockID = lockID

// BellName is the name of the bell of owner for key, the MySQL user lock
// that wakes the waiter behind owner.
func BellName(ctx context.Context, d *Driver, key, owner string) (string, error) {
	return d.bellName(ctx, key, owner)
}
