package sqldriver

import "context"

// LockID is lockID, for tests that take a key's advisory lock themselves.
var LockID = lockID

// BellName is the name of key's bell, the MySQL user lock that wakes the
// key's waiters.
func BellName(ctx context.Context, d *Driver, key string) (string, error) {
	return d.bellName(ctx, key)
}
