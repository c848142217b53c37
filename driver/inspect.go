package driver

import (
	"context"
	"time"
)

// Inspector is implemented by drivers that can read the state of a key on
// the backend and release it by force, for operators: the `locker status`
// and `locker release --force` commands, dashboards, runbooks. Package
// locker never calls it while locking. The driver's Capabilities report
// Inspect when it serves these calls.
//
// Without it, a key's state is visible only through the backend's own
// tools, and a stuck key is freed only when its TTL runs out.
type Inspector interface {
	// Inspect reads the state of key without changing it (it may drop
	// what has expired, as any operation of the driver may). A key that
	// nobody holds or waits for has a zero KeyState, apart from Fence.
	// It follows the context rules of Driver.
	Inspect(ctx context.Context, key string) (KeyState, error)
	// ForceRelease ends every hold of key at once, whoever its owner, as
	// an administrator would, and wakes the key's waiters where the
	// backend notifies them. It returns how many holds it ended. The
	// holders learn of the loss from their next renewal (or from the
	// backend, where it reports losses). The fence counter is kept, so the next
	// grant of key gets a greater token. It follows the context rules of
	// Driver.
	ForceRelease(ctx context.Context, key string) (int, error)
}

// KeyState is what Inspector.Inspect reports about a key.
type KeyState struct {
	// Mode is the mode of the holders; meaningful only when Holders is
	// not empty.
	Mode Mode
	// Limit is the limit of the key's counted holds (see Capabilities.Counted),
	// or 0.
	Limit int64
	// Holders are the live holds of the key, ordered by token.
	Holders []Holder
	// Fence is the highest token the backend has granted for the key, or
	// 0 when it does not know it or has granted none (on backends whose
	// token is a global counter, such as a store-wide revision, it is the
	// largest token among the holders).
	Fence uint64
	// Waiting counts the entries of the backend's wait queue for the key
	// (Request.Queued, Acquirer): owners waiting their turn. It is 0 on a
	// backend without a queue.
	Waiting int
}

// Holder is one live hold of a key.
type Holder struct {
	Owner string
	Token uint64
	// Remaining is the time until the lease runs out unless renewed, as
	// the backend sees it; 0 when the backend does not tell.
	Remaining time.Duration
	// Weight is the number of units a counted hold takes (see Capabilities.Counted),
	// or 0 for an uncounted one.
	Weight int64
	// Value is the value published with the grant (see Capabilities.Values),
	// or empty.
	Value string
}
