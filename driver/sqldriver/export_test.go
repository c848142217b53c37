package sqldriver

// LockID is lockID, for tests that take a key's advisory lock themselves.
var LockID = lockID
