package zkdriver

import "time"

// hotFor is how long a key counts as contended after it was last seen so:
// meanwhile TryAcquire lists the queue before it creates a node (peek).
// A refused create costs two fsynced writes (create, delete) where the
// listing costs a read; contended throughput is bound by those writes,
// two per acquisition (BenchmarkBackend's contended rows).
const hotFor = time.Second

// Bounds of the driver's LRUs: the keys seen contended, the first nodes of
// contended keys observed for expiry, and the key nodes known to exist
// (a key not known is created before its lock node: 3 requests per new
// key's pair instead of 4).
const (
	maxHot      = 1024
	maxObserved = 4096
	maxParents  = 4096
)
