package etcddriver

// LockBase returns the prefix of the entries of key's lock, for a Driver
// with Options.Prefix prefix.
func LockBase(prefix, key string) string { return lockBase(prefix, key) }
