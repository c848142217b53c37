// Package driver defines the interfaces that lock backends implement for
// package locker.
//
// Most code should use package locker ([github.com/go-locker/locker]), not
// this package. Implement a driver here, then verify it with
// [github.com/go-locker/locker/lockertest.TestDriver].
//
// # What a driver does
//
// A driver holds only atomic backend operations on leases: acquire one key
// once ([Driver.TryAcquire]), extend a lease ([Driver.Refresh]), and give it
// up ([Driver.Release]). Everything that must behave the same on every
// backend lives in package locker, which is the only caller of a driver: key
// validation, owner tokens, reentry counts, waiting and backoff, the
// watchdog that renews leases, the local deadline that declares a hold lost,
// misuse checks and error wrapping. A driver therefore receives normalised
// input: Key is non-empty valid UTF-8 of at most [MaxKeyLen] bytes without NUL,
// Owner is a unique string of 32 hex digits, TTL is positive and within the
// range the driver reports through [TTLLimiter].
//
// A driver must:
//
//   - Grant a key in [Exclusive] mode to at most one owner at a time, and in
//     [Shared] mode only alongside other shared owners, for as long as the
//     lease's TTL has not run out on the backend.
//   - Give every grant a fencing token (Lease.Token) that is strictly
//     greater than every token it granted before for that key, and never 0.
//     Tokens are compared only within one key.
//   - Make TryAcquire idempotent for the same owner: a second TryAcquire by
//     req.Owner while it holds req.Key extends the lease and returns the same
//     token, so that the front-end may retry an attempt whose reply was lost.
//   - Check the owner in Refresh and Release: a lease whose owner no longer
//     holds the key is never extended, re-created or deleted on behalf of
//     anyone else. Both return an error wrapping [ErrNotHeld] in that case.
//   - Encode keys injectively for its backend: keys that are hostile to the
//     backend (slashes, dots, control characters, prefixes of other keys)
//     are encoded, never rejected.
//   - Refuse a call whose context is already done, without touching the
//     backend, returning an error wrapping ctx.Err().
//   - Return by the context's deadline, even when the backend does not
//     answer, with an error wrapping ctx.Err(); never clean up
//     synchronously after it: the front-end removes what an abandoned
//     call may have left (a grant whose reply was lost, a queue entry)
//     with a Release in the background.
//   - Wrap with [Permanent] the errors of a backend client that was
//     closed (and any other error no retry can cure), and return them
//     promptly: the front-end never retries them.
//   - Keep a lease's TTL on refresh: Refresh is called with the Lease that
//     TryAcquire returned (Lease.TTL as granted).
//   - Wrap backend errors with %w so callers can reach them with errors.As,
//     and be safe for concurrent use by multiple goroutines.
//
// A driver should not retry operations itself unless it knows the operation
// was not applied; the front-end retries with the same owner instead.
// A driver that knows an error can never go away on retry (a misconfigured
// backend, a request the backend cannot honour) wraps it with [Permanent].
//
// # Optional interfaces
//
// A driver may implement optional interfaces, discovered by type assertion
// as package database/sql discovers them on its drivers. Each documents what
// package locker does when the driver lacks it:
//
//   - [Sharer]: the driver implements Mode [Shared]. Without it, the read
//     side of locker.RWMutex returns an error wrapping errors.ErrUnsupported.
//   - [Notifier]: the backend tells waiters when a key may have become free
//     (Redis pub/sub, etcd and ZooKeeper watches). Without it, waiters poll
//     TryAcquire with exponential backoff capped by the holder's remaining
//     lease ([LockedError.Remaining]).
//   - [Counter]: the driver grants counted Shared requests (a limit per
//     key, a weight per request). Without it, locker.Semaphore returns an
//     error wrapping errors.ErrUnsupported.
//   - [ValueKeeper]: the driver keeps a value with each grant and reports
//     it through [Inspector]. Without them, locker.Election returns an
//     error wrapping errors.ErrUnsupported.
//   - [Queuer]: the backend keeps a wait queue per key so that a waiter that
//     has waited for a while is served before newcomers. Without it,
//     waiters are served in FIFO order within one process only, and a
//     process that releases and re-locks at once may overtake waiters in
//     other processes.
//   - [Acquirer]: the backend has a fair queue of its own (etcd revisions,
//     ZooKeeper sequential nodes) and the driver waits in it. Without it,
//     the front-end waits itself: TryAcquire, then a notification or
//     backoff, then TryAcquire (or TryAcquireQueued) again.
//   - [LossWatcher]: the backend reports lost leases (ZooKeeper session
//     expiry, etcd lease revocation). Without it, loss is learnt from a
//     rejected renewal or the local deadline only.
//   - [BatchRefresher]: many leases are renewed in one round trip. Without
//     it, the watchdog calls Refresh once per lease, concurrently.
//   - [TTLLimiter] and [TTLChecker]: the backend cannot honour every TTL.
//     Without them, any positive TTL is accepted.
//   - [Inspector]: operators read a key's state and release it by force
//     (`locker status`, `locker release --force`). Without it, they cannot.
//   - [TokenFloor]: the driver can raise a key's tokens above a given
//     value. Without it, package quorumdriver cannot use the driver.
//
// locker never closes a driver or the client inside it: whoever built the
// driver owns its client.
package driver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// Mode is the way a key is held.
type Mode uint8

const (
	// Exclusive holds exclude every other holder of the key.
	Exclusive Mode = iota
	// Shared holds coexist with other shared holds but exclude exclusive
	// ones. Only drivers that implement [Sharer] accept it.
	Shared
)

// String returns "exclusive" or "shared".
func (m Mode) String() string {
	switch m {
	case Exclusive:
		return "exclusive"
	case Shared:
		return "shared"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// Request asks for one grant of a key.
type Request struct {
	// Key names the lock. The front-end has validated it; the driver
	// encodes it for its backend.
	Key string
	// Owner identifies the hold: unique per hold, generated by the
	// front-end from 128 random bits.
	Owner string
	// Mode is Exclusive or Shared.
	Mode Mode
	// TTL is the lease length, positive and within the driver's limits.
	TTL time.Duration
	// Limit, when positive, makes a Shared request counted: the key is a
	// semaphore of Limit units and the request asks for Weight of them
	// (see Counter). It is 0 for every other request, and for Exclusive
	// ones always.
	Limit int64
	// Weight is the number of units a counted request takes, in
	// [1, Limit]; 0 when Limit is 0.
	Weight int64
	// Value, when not empty, is published with the grant: Inspector
	// reports it as Holder.Value (see ValueKeeper). It is at most
	// MaxValueLen bytes of any content. Elections publish the leader's
	// value this way.
	Value string
}

// Lease is a grant of a key to an owner.
type Lease struct {
	Key   string
	Owner string
	Mode  Mode
	// Token is the fencing token of the grant: strictly greater than every
	// token granted before for Key, never 0, the same on an idempotent
	// re-acquire or a refresh.
	Token uint64
	// TTL is the lease length the backend granted. The front-end measures
	// it from the moment it sent the request, or from Start.
	TTL time.Duration
	// Start, when not zero, is a local time no later than the moment the
	// backend began counting TTL, for a lease the driver learned of before
	// the request that returns it (a handoff announced to a queued owner,
	// a grant a blocking Acquire waited for): the front-end counts the
	// lease from Start when it is earlier than its request. Refresh and
	// RefreshBatch leave it zero.
	Start time.Time
}

// Driver is the minimal lock backend. All methods must be safe for
// concurrent use.
type Driver interface {
	// TryAcquire makes one attempt to grant req.Key to req.Owner, without
	// waiting. If another owner holds the key in a conflicting mode it
	// returns an error wrapping ErrLocked, preferably a *LockedError that
	// says how long the conflicting hold may still last. If req.Owner
	// already holds the key it extends the lease to req.TTL and returns the
	// same token.
	TryAcquire(ctx context.Context, req Request) (Lease, error)

	// Refresh extends l to l.TTL from now if l.Owner still holds l.Key in
	// l.Mode (with token l.Token, when it is not 0), and returns the lease
	// with the same token. Otherwise it returns an error wrapping
	// ErrNotHeld and changes nothing: it never re-creates an expired hold.
	Refresh(ctx context.Context, l Lease) (Lease, error)

	// Release gives up l if l.Owner still holds l.Key in l.Mode (with token
	// l.Token, when it is not 0), and wakes the
	// key's waiters where the driver implements Notifier. If l.Owner does
	// not hold the key it returns an error wrapping ErrNotHeld and leaves
	// other owners' holds untouched. Release also removes any wait-queue
	// entry of l.Owner (see Queuer), whatever it returns; l.Token may be
	// 0 for that purpose.
	Release(ctx context.Context, l Lease) error
}

// Sharer is implemented by drivers that grant Mode Shared.
//
// Without it, locker.RWMutex's read locking returns an error wrapping
// errors.ErrUnsupported; exclusive locking works on every driver.
type Sharer interface {
	// SupportsShared reports whether Mode Shared is available. A driver
	// that wraps another may return false when the wrapped one lacks it.
	SupportsShared() bool
}

// Counter is implemented by drivers that grant counted Shared requests
// (Request.Limit > 0): package locker's Semaphore.
//
// A counted request for Weight units of a key is granted when no one holds
// the key exclusively and the Weight of every live hold of the key plus
// its own is at most Limit; on a driver that keeps a wait queue (Queuer,
// Acquirer), only if every entry ahead of it in the queue is a Shared one
// and their weights count against Limit too, so that a large request is
// not overtaken by small ones. Every grant gets a token of its own, greater
// than every token granted before for the key, as every grant does. An
// idempotent re-acquire by a holder extends its lease with the weight it
// was granted. A refusal wraps ErrLocked; its LockedError.Remaining is the
// time until the first hold or queue entry in the way may expire.
//
// Every holder of a key must agree on Limit: a counted request whose Limit
// differs from that of a live hold of the key (an uncounted Shared hold
// has Limit 0), or of a queue entry where the driver keeps it, is refused
// with an error wrapping a *LimitError, never granted. An uncounted Shared
// request on a key with live counted holds is refused the same way.
//
// CheckCount checks a request's Limit, Weight and Value before any I/O.
// Without Counter, locker.Semaphore returns an error wrapping
// errors.ErrUnsupported.
type Counter interface {
	// SupportsCounted reports whether counted requests are available. A
	// driver that wraps another may return false when the wrapped one
	// lacks them.
	SupportsCounted() bool
}

// ValueKeeper is implemented by drivers that keep Request.Value with each
// grant and report it through Inspector as Holder.Value, for as long as the
// hold lives. An idempotent re-acquire keeps the value first granted.
//
// Without it (or without Inspector), locker.Election returns an error
// wrapping errors.ErrUnsupported: nobody could read the leader's value.
type ValueKeeper interface {
	// SupportsValues reports whether values are kept.
	SupportsValues() bool
}

// Notifier is implemented by drivers whose backend can tell waiters that a
// key may have become free.
//
// Without it, waiters poll TryAcquire with exponential backoff, each delay
// capped by the remaining lease reported in a *LockedError.
type Notifier interface {
	// Subscribe starts listening for releases of key. Every release of
	// key that happens after Subscribe returns produces a value on the
	// subscription's channel (values may be coalesced), with one
	// exception a driver may make: the release of an exclusive hold that
	// no TryAcquire or TryAcquireQueued of key was refused by. (redisdriver
	// makes it, so that an uncontended release does not publish.) A
	// release that hands the key over to a queued owner (see Queuer) may
	// be delivered only through the Driver that queued that owner. The
	// front-end subscribes after a failed attempt and attempts once more
	// before it waits: if that attempt is refused, the hold that refused
	// it is one whose release is delivered, so no release it waits for is
	// missed.
	Subscribe(ctx context.Context, key string) (Subscription, error)
}

// Subscription is a live Notifier subscription.
type Subscription interface {
	// C returns a channel that receives a value when the key may be free.
	// It is not closed by the driver.
	C() <-chan struct{}
	// Close ends the subscription. It must be safe to call once from any
	// goroutine.
	Close() error
}

// Queuer is implemented by drivers that keep a server-side wait queue per
// key, to give waiters in different processes bounded waiting.
//
// Without it, the front-end serves waiters in FIFO order within one process
// only.
type Queuer interface {
	// TryAcquireQueued is TryAcquire for a caller that has already waited
	// for req.Key. If the key cannot be granted, the driver records
	// req.Owner in the key's wait queue (in arrival order, at most once per
	// owner) for req.TTL from now, renewed by each further call. While the
	// queue holds live entries, the driver grants the key, through
	// TryAcquire or TryAcquireQueued, only to the queue's head or, for
	// Mode Shared, to a run of shared owners at the head; a granted owner
	// leaves the queue. Release with l.Owner removes the owner's entry.
	//
	// A driver may hand the key over: when a release leaves it free, it
	// grants it to the queue's head (or head run) for as long as their
	// entries live, without being asked. The new holder's next
	// TryAcquireQueued returns the grant, extended to req.TTL, like any
	// re-acquire by a holder; a Release with l.Token 0 by a queued owner
	// that gives up then releases the grant (and returns nil instead of
	// ErrNotHeld). Such a driver may notify a handoff only through the
	// Driver whose TryAcquireQueued queued the new holder: nobody else
	// can proceed.
	TryAcquireQueued(ctx context.Context, req Request) (Lease, error)
}

// Acquirer is implemented by drivers whose backend keeps a fair wait queue
// of its own, such as etcd's create revisions or ZooKeeper's sequential
// nodes, so that the driver can wait in it.
//
// The front-end calls Acquire, instead of its own wait loop, after a
// TryAcquire has failed with ErrLocked; within one process only the head of
// the key's line calls it. Once Acquire returns a lease the front-end
// counts its TTL from Lease.Start or, when the driver leaves Start zero,
// calls Refresh on it and counts the lease's TTL from the moment it sent
// that Refresh. Without Acquirer, the front-end waits itself (see Notifier
// and Queuer).
type Acquirer interface {
	// Acquire waits until req.Key is granted to req.Owner, in the order of
	// the backend's queue, or ctx is done. While it waits it keeps its
	// place alive (a waiter whose own session or lease expires while
	// queued gets an error, never the lock). It returns by ctx's deadline;
	// on error, what it may have left for req.Owner (its queue entry, a
	// grant whose reply was lost) is removed by the front-end's Release
	// with l.Owner = req.Owner and l.Token 0, in the background, so
	// Acquire need not clean up itself (it may, if that does not delay
	// its return).
	Acquire(ctx context.Context, req Request) (Lease, error)
}

// LossWatcher is implemented by drivers whose backend reports lost leases,
// such as a ZooKeeper session expiry or an etcd lease revocation.
//
// Without it the front-end learns of a loss from a renewal the backend
// rejects, or from its local deadline; with it, the loss is declared as
// soon as the backend reports it. Either way the local deadline applies.
type LossWatcher interface {
	// WatchLoss arranges for lost to be called, at most once and from a
	// goroutine of the driver's, when the backend reports that l is gone.
	// lost must not block. After stop returns, lost is not called.
	// LossCallback gives a driver these rules.
	WatchLoss(l Lease, lost func(err error)) (stop func())
}

// BatchRefresher is implemented by drivers that can renew many leases in
// one round trip.
//
// Without it, the watchdog calls Refresh once per lease, concurrently.
type BatchRefresher interface {
	// RefreshBatch refreshes each of ls as Refresh would and returns one
	// error per lease, in order: nil when ls[i] was extended to ls[i].TTL,
	// an error wrapping ErrNotHeld when it is no longer held, another error
	// when the outcome is not known. The slice has len(ls) elements.
	RefreshBatch(ctx context.Context, ls []Lease) []error
}

// TTLLimiter is implemented by drivers whose backend cannot honour every
// TTL. The front-end rejects a TTL outside [min, max] with an error naming
// the limit; it never rounds.
//
// Without it, every positive TTL is accepted.
type TTLLimiter interface {
	TTLRange() (min, max time.Duration)
}

// TTLChecker is implemented by drivers that accept only some TTLs within
// their range, such as whole seconds. The front-end calls CheckTTL before
// any I/O and reports a non-nil error, wrapped in its invalid-TTL error;
// it never rounds.
//
// Without it, every TTL within the TTLLimiter range is accepted.
type TTLChecker interface {
	CheckTTL(ttl time.Duration) error
}

var (
	// ErrLocked means another owner holds the key in a conflicting mode.
	ErrLocked = errors.New("held by another owner")
	// ErrNotHeld means the owner does not hold the key: it expired, was
	// released, or was never granted.
	ErrNotHeld = errors.New("lease not held")
)

// LockedError is the error TryAcquire returns when another owner holds the
// key. It matches ErrLocked with errors.Is.
type LockedError struct {
	// Remaining is how long the conflicting holds may still last on the
	// backend, or 0 when the driver does not know. When a wait queue
	// (Queuer) is what blocks the caller, it is how long the entries ahead
	// of it may still live. Waiters use it to cap their wait, so a
	// release that nobody announces (an expiry) costs at most Remaining.
	Remaining time.Duration
}

// Error implements error.
func (e *LockedError) Error() string {
	if e.Remaining > 0 {
		return fmt.Sprintf("%v (expires in %v)", ErrLocked, e.Remaining)
	}
	return ErrLocked.Error()
}

// Is reports whether target is ErrLocked.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// ErrLimitMismatch means a counted request's Limit differs from the limit
// the key's live holders agreed on (see Counter).
var ErrLimitMismatch = errors.New("limit differs from the key's holders'")

// LimitError is the error a Counter returns for a request whose Limit
// differs from that of the key's live holds. It matches ErrLimitMismatch
// with errors.Is.
type LimitError struct {
	// Limit is the limit of the key's live holds: 0 for uncounted Shared
	// holds, or when the driver does not know it.
	Limit int64
}

// Error implements error.
func (e *LimitError) Error() string {
	return fmt.Sprintf("%v (theirs: %d)", ErrLimitMismatch, e.Limit)
}

// Is reports whether target is ErrLimitMismatch.
func (e *LimitError) Is(target error) bool { return target == ErrLimitMismatch }

// permanentError marks an error that no retry can cure.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as permanent: the front-end returns it at once
// instead of retrying. It returns nil for a nil err.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

// IsPermanent reports whether err, or an error it wraps, was marked with
// Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// MaxKeyLen is the longest key, in bytes, that the front-end passes to a
// driver (locker.MaxKeyLen is the same limit).
const MaxKeyLen = 512

// MaxValueLen is the longest Request.Value, in bytes, that the front-end
// passes to a driver.
const MaxValueLen = 4096

// MaxQuotedKeyLen is how many bytes of a key QuoteKey quotes.
const MaxQuotedKeyLen = 64

// QuoteKey quotes key for an error message as strconv.Quote does, cutting
// a key longer than MaxQuotedKeyLen bytes at a character boundary and
// saying how long it is, so that messages stay readable whatever the key.
// The front-end's errors and the drivers of this module use it.
func QuoteKey(key string) string {
	if len(key) <= MaxQuotedKeyLen {
		return strconv.Quote(key)
	}
	cut := MaxQuotedKeyLen
	for cut > 0 && !utf8.RuneStart(key[cut]) {
		cut--
	}
	return strconv.Quote(key[:cut]) + "… (" + strconv.Itoa(len(key)) + " bytes)"
}
