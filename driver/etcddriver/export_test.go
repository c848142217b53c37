package etcddriver

// LockBase returns the prefix of the entries of key's lock, for a Driver
// with Options.Prefix prefix.
func LockBase(prefix, key string) string { return lockBase(prefix, key) }

// Watches returns how many lock watches d has open.
func (d *Driver) Watches() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.watches)
}
