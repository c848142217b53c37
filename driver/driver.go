// Package driver defines the contract between package locker and the lock
// backends it runs on.
//
// Most code should use package locker ([github.com/go-locker/locker]), not
// this package. Implement a driver here, then check it with
// [github.com/go-locker/locker/lockertest.TestDriver]; that package's
// documentation walks a driver author from a complete driver of under 150
// lines (its Example (Driver): the three required methods over a map) to
// the optional parts below.
//
// The contract has a required part, three methods every backend can
// implement, and optional parts, each either something the front-end
// cannot emulate or a faster way to do what it can. It reads top to bottom:
// what package locker does, what a driver must do, how a driver says what
// it can do, how waiting works, and what each optional part adds.
//
// # What package locker does
//
// Package locker is the only caller of a driver, and it owns everything
// that must behave the same on every backend: key and option validation,
// owner tokens, reentry counts, the in-process line of waiters for a key
// (fairness within a process), waiting and backoff, the watchdog that
// renews leases, the local deadline that declares a hold lost, misuse
// checks and error wrapping. A driver holds only atomic backend
// operations on leases.
//
// The front-end validates every request before it reaches a driver, and a
// driver may rely on it: Key is non-empty valid UTF-8 of at most
// [MaxKeyLen] bytes without NUL; Owner is a unique string of 32 hex
// digits; Mode is [Exclusive], or [Shared] on a driver whose
// [Capabilities] report Shared; TTL is positive and within the driver's
// [Capabilities]; Limit, Weight and Value are as [Request] documents them,
// and set only on a driver whose Capabilities report Counted or Values;
// Queued and MinToken are set only where the Capabilities report Queue
// and TokenFloor. A driver does not check any of it again: each check is
// written once, in the front-end, and a driver checks only what the
// front-end cannot know (a limit of its backend that changes at run time,
// such as a session timeout), marking what it refuses with [Permanent].
//
// # What a driver must do
//
// A [Driver] has three methods: TryAcquire grants a key once, without
// waiting; Refresh extends a lease; Release gives it up. A driver must:
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
//     A lease is refreshed, released and watched only through the Driver
//     value that granted it, or, for what an abandoned call left, released
//     with [Lease].Abandoned through the Driver value that call was made
//     on; a driver may refuse, with [ErrNotHeld], a lease that another
//     Driver value granted, and must leave it held.
//   - Refuse a conflicting TryAcquire with an error wrapping [ErrLocked],
//     preferably a *[LockedError] that says how long the conflicting hold
//     may still last: waiters use it to cap their sleep.
//   - Encode keys injectively for its backend: keys that are hostile to the
//     backend (slashes, dots, control characters, prefixes of other keys)
//     are encoded, never rejected.
//   - Refuse a call whose context is already done, without touching the
//     backend, returning an error wrapping ctx.Err().
//   - Return by the context's deadline, even when the backend does not
//     answer, with an error wrapping ctx.Err(); never clean up
//     synchronously after it: the front-end removes what an abandoned
//     call may have left (a grant whose reply was lost, a queue entry)
//     in the background, with a Release whose Lease has Abandoned set.
//   - Once the driver or the backend client under it is closed, fail
//     every call promptly with an error wrapping [ErrClosed], marked
//     [Permanent] (as is any other error no retry can cure): the
//     front-end never retries them.
//   - Keep a lease's TTL on refresh: Refresh is called with the Lease that
//     TryAcquire returned (Lease.TTL as granted).
//   - Wrap backend errors with %w so callers can reach them with errors.As,
//     and be safe for concurrent use by multiple goroutines.
//
// A driver does not retry: the front-end retries a failed TryAcquire with
// the same owner, and a failed Release until it lands or the lease is
// gone. A driver repeats a request only within the call, never after it
// returned, and only when the backend says it was not applied (a
// transaction rolled back by a deadlock, a compare-and-swap that lost a
// race), or when a request that is idempotent for the owner (an acquire
// by the owner, a renewal, a token floor; not a release) got no answer
// within a part of the call's time that the driver gave it (a quorum
// member's timeout, one attempt on a connection that may have broken
// under it).
//
// That is a complete driver. With it alone the front-end supplies waiting
// (TryAcquire again after a backoff capped by [LockedError.Remaining]),
// renewal (Refresh from its watchdog), loss detection (a rejected renewal,
// or its local deadline) and fairness among the waiters of one process.
//
// # Capabilities
//
// A driver says what else it can do by implementing [Describer], whose
// Capabilities method returns a plain [Capabilities] value: the modes and
// requests it grants (Shared, Counted, Values), the TTLs it accepts
// (MinTTL, MaxTTL, TTLUnit), the request fields its TryAcquire honours
// (Queue, TokenFloor), and which of the optional interfaces below it
// serves (Notify, Acquire, WatchLoss, RefreshBatch, Inspect). A driver
// without Describer has the zero Capabilities: exclusive holds, any
// positive TTL, nothing optional. [CapabilitiesOf] reads them.
//
// Capabilities are data rather than interfaces so that a driver that wraps
// others (a quorum of backends, an instrumented driver) can implement every
// optional method once and report, from its members' Capabilities, which
// of them work: the front-end calls an optional method only when the
// Capabilities say it is served, so no type per combination of members is
// needed, and nothing has to see through a wrapper. The flags that name an
// interface (Notify and the others) are promises: a driver that reports
// one implements the interface, and lockertest checks it.
//
// # Waiting
//
// There is one waiting model, run by the front-end. A lock call that finds
// the key held waits for a wake-up and calls TryAcquire again, until it is
// granted or its context is done. Without any optional part, the wake-up
// is a timer: exponential backoff, each delay capped by the remaining
// lease the refusal reported. Each optional part of waiting makes one step
// of that loop better, and none changes its shape:
//
//   - Notify ([Notifier]): the backend tells waiters when a key may have
//     become free, so the wake-up comes with the release rather than with
//     the timer, which stays as a cap.
//   - Queue ([Request].Queued): the backend keeps a wait queue per key.
//     Once a waiter has waited for a while, the front-end sets Queued on its
//     attempts, and the backend then grants the key to the queue's head
//     before newcomers, so that waiters in different processes have
//     bounded waiting.
//   - Acquire ([Acquirer]): the backend has a fair queue of its own and the
//     driver can wait in it; the front-end then hands the wait for the head
//     of its in-process line to Acquire, instead of running the loop.
//
// # Optional parts, and what the front-end does without them
//
//   - Shared: the driver grants Mode [Shared]. Without it, the read side
//     of locker.RWMutex returns an error wrapping errors.ErrUnsupported.
//   - Counted: the driver grants counted Shared requests (Request.Limit).
//     Without it, locker.Semaphore returns an error wrapping
//     errors.ErrUnsupported.
//   - Values: the driver keeps Request.Value with each grant and reports it
//     through [Inspector]. Without it (or without Inspect), locker.Election
//     returns an error wrapping errors.ErrUnsupported.
//   - MinTTL, MaxTTL, TTLUnit: the backend cannot honour every TTL. The
//     front-end rejects a TTL outside them before any I/O, with an error
//     naming the limit; it never rounds. Without them, any positive TTL is
//     accepted.
//   - Notify ([Notifier], [Subscription]): without it, waiters sleep until
//     a timer fires, capped by [LockedError.Remaining].
//   - Queue: without it, waiters are served in FIFO order within one process
//     only, and a process that releases and re-locks at once may overtake
//     waiters in other processes.
//   - Acquire ([Acquirer]): without it, the front-end waits itself, as
//     described under Waiting.
//   - WatchLoss ([LossWatcher]): the backend reports lost leases. Without
//     it, loss is learnt from a rejected renewal or the local deadline only.
//   - RefreshBatch ([BatchRefresher]): many leases are renewed in one round
//     trip. Without it, the watchdog calls Refresh once per lease,
//     concurrently.
//   - Inspect ([Inspector]): operators read a key's state and release it by
//     force (`locker status`, `locker release --force`). Without it, they
//     cannot.
//   - TokenFloor ([Request].MinToken): a holder's token can be raised to a
//     value chosen elsewhere. Package locker never uses it; drivers that
//     combine several backends into one (a quorum) require it of their
//     members.
//
// # Why eight interfaces
//
// The package exports eight interfaces: [Driver]; [Describer], through
// which every other capability is announced; and six that each carry
// methods no flag can replace: [Notifier] with its [Subscription], a
// stream of wake-ups; [Acquirer], a blocking wait; [LossWatcher], a
// callback; [BatchRefresher], a different call shape; [Inspector], the
// operators' calls. What is only a yes or no (a mode, counting, values,
// queueing, token floors) or a number (TTL limits) is a field of
// Capabilities; what changes a grant (a queue entry, a token floor) is a
// field of Request, so that it goes through TryAcquire.
//
// Package locker never closes a driver or the client inside it: whoever
// built the driver owns its client.
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
	// ones. Only drivers whose Capabilities report Shared accept it.
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
	// (see Capabilities.Counted). It is 0 for every other request, and
	// for Exclusive ones always.
	Limit int64
	// Weight is the number of units a counted request takes, in
	// [1, Limit]; 0 when Limit is 0.
	Weight int64
	// Value, when not empty, is published with the grant: Inspector
	// reports it as Holder.Value (see Capabilities.Values). It is at most
	// MaxValueLen bytes of any content. Elections publish the leader's
	// value this way.
	Value string

	// Queued is set, on a driver whose Capabilities report Queue, by a
	// caller that has already waited for Key. If the key cannot be
	// granted, the driver records Owner in the key's wait queue (in
	// arrival order, at most once per owner) for TTL from now, renewed by
	// each further queued attempt. While the queue holds live entries,
	// the driver grants the key, queued or not, only to the queue's head
	// or, for Mode Shared, to a run of shared owners at the head; a
	// granted owner leaves the queue. Release with l.Owner removes the
	// owner's entry. A TryAcquire without Queued never joins nor renews a
	// queue entry.
	//
	// A driver may hand the key over: when a release leaves it free, it
	// grants it to the queue's head (or head run) for as long as their
	// entries live, without being asked. The new holder's next queued
	// attempt returns the grant, extended to TTL, like any re-acquire by
	// a holder; the Release with Lease.Abandoned by which a queued owner
	// gives up then releases the grant (and returns nil instead of
	// ErrNotHeld).
	// Such a driver may notify a handoff only through the Driver whose
	// queued attempt queued the new holder: nobody else can proceed.
	Queued bool

	// MinToken, when not 0, is set on a driver whose Capabilities report
	// TokenFloor by a caller that holds Key and wants its token raised to
	// a value chosen elsewhere, such as the token a quorum of several
	// backends agreed on. Such a request grants nothing: when Owner holds
	// Key in Mode, the driver makes MinToken that hold's token if its
	// own is lower, as if it had been granted with it (a re-acquire
	// returns it, and the hold's release keeps it as a released token
	// would be kept), and makes every token it grants for Key afterwards
	// greater than MinToken for as long as that matters (a driver whose
	// tokens come from a clock may forget it once its clock has passed
	// it). It returns a Lease for the hold whose Token is at least
	// MinToken; the hold's expiry is left as it was, and the returned
	// Lease.TTL is 0. When Owner does not hold Key, it returns an error
	// wrapping ErrNotHeld, and the floor may or may not have been raised:
	// only a holder's floor is guaranteed. A MinToken lower than what the
	// driver already guarantees changes nothing. Package locker never
	// sets it.
	MinToken uint64
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

	// Abandoned is set only on a Release, by the front-end, to remove
	// what a call it abandoned may have left for Owner on Key: a grant in
	// Mode whose reply was lost, whatever its token, and Owner's
	// wait-queue entry (see Request.Queued). Token and TTL are 0 then:
	// the front-end does not know them. Such a Release returns nil when
	// it released a grant and an error wrapping ErrNotHeld when there
	// was none; it removes the queue entry either way. Without Abandoned
	// a Release releases only the grant whose token is Token, and never
	// a grant of a Token 0 (no grant has that token).
	Abandoned bool
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
	// l.Mode with token l.Token, and returns the lease with the same
	// token. Otherwise it returns an error wrapping
	// ErrNotHeld and changes nothing: it never re-creates an expired hold.
	Refresh(ctx context.Context, l Lease) (Lease, error)

	// Release gives up l if l.Owner still holds l.Key in l.Mode with
	// token l.Token (with any token when l.Abandoned is set), and wakes
	// the key's waiters where the driver notifies them. If l.Owner does
	// not hold the key so it returns an error wrapping ErrNotHeld and
	// leaves other owners' holds untouched. With l.Abandoned it also
	// removes l.Owner's wait-queue entry (see Request.Queued), whatever
	// it returns.
	Release(ctx context.Context, l Lease) error
}

// Describer is implemented by drivers that can do more than the required
// part of the contract: its Capabilities say what. A driver without it has
// the zero Capabilities.
//
// A driver that wraps another, to instrument it say, implements every
// optional interface by forwarding, and Describer by returning
// CapabilitiesOf the wrapped driver, with the flags of what it does not
// forward cleared: one wrapper type serves every driver.
type Describer interface {
	// Capabilities reports what the driver can do. Its flags must not
	// change during the driver's life; MinTTL and MaxTTL may (a limit
	// the backend negotiates when it connects), and the front-end reads
	// them on every lock call.
	Capabilities() Capabilities
}

// CapabilitiesOf returns d's Capabilities, or the zero Capabilities when d
// does not implement Describer.
func CapabilitiesOf(d Driver) Capabilities {
	if c, ok := d.(Describer); ok {
		return c.Capabilities()
	}
	return Capabilities{}
}

// Capabilities says what a driver can do beyond the required part of the
// contract. The zero value is a driver that grants exclusive holds with
// any positive TTL and serves no optional interface. The package
// documentation says what the front-end does without each part.
type Capabilities struct {
	// Shared: the driver grants Mode Shared.
	Shared bool

	// Counted: the driver grants counted Shared requests (Request.Limit
	// > 0), package locker's Semaphore. Only a driver that reports Shared
	// may report it.
	//
	// A counted request for Weight units of a key is granted when no one
	// holds the key exclusively and the Weight of every live hold of the
	// key plus its own is at most Limit; on a driver that keeps a wait
	// queue (Queue, Acquire), only if every entry ahead of it in the
	// queue is a Shared one and their weights count against Limit too,
	// so that a large request is not overtaken by small ones. Every grant
	// gets a token of its own, greater than every token granted before
	// for the key, as every grant does. An idempotent re-acquire by a
	// holder extends its lease with the weight it was granted. A refusal
	// wraps ErrLocked; its LockedError.Remaining is the time until the
	// first hold or queue entry in the way may expire.
	//
	// Every holder of a key must agree on Limit: a counted request whose
	// Limit differs from that of a live hold of the key (an uncounted
	// Shared hold has Limit 0), or of a queue entry where the driver
	// keeps it, is refused with an error wrapping a *LimitError, never
	// granted. An uncounted Shared request on a key with live counted
	// holds is refused the same way.
	Counted bool

	// Values: the driver keeps Request.Value with each grant and reports
	// it through Inspector as Holder.Value, for as long as the hold
	// lives. An idempotent re-acquire keeps the value first granted. A
	// driver that reports it also reports Inspect.
	Values bool

	// MinTTL, when positive, is the shortest TTL the driver accepts.
	MinTTL time.Duration
	// MaxTTL, when positive, is the longest TTL the driver accepts.
	MaxTTL time.Duration
	// MaxTTLSource, if set, names what sets MaxTTL, for the front-end's
	// refusal of a longer TTL, which then suggests raising it, such as
	// zkdriver's "the ZooKeeper session timeout".
	MaxTTLSource string
	// TTLUnit, when positive, is the granularity of the backend's expiry,
	// such as a second: the driver accepts only TTLs that are whole
	// multiples of it.
	TTLUnit time.Duration

	// Queue: the driver honours Request.Queued, keeping a wait queue per
	// key on the backend.
	Queue bool
	// TokenFloor: the driver honours Request.MinToken.
	TokenFloor bool

	// Notify: the driver implements Notifier and its subscriptions
	// deliver releases.
	Notify bool
	// Acquire: the driver implements Acquirer.
	Acquire bool
	// WatchLoss: the driver implements LossWatcher and its backend
	// reports lost leases.
	WatchLoss bool
	// RefreshBatch: the driver implements BatchRefresher.
	RefreshBatch bool

	// Unsupported, if set, is the error the front-end's refusals of the
	// shared, counted or value requests this driver lacks wrap, saying
	// why; it wraps errors.ErrUnsupported. Nil: errors.ErrUnsupported.
	// Capabilities are compared with ==: make it once, as a package-level
	// value (fmt.Errorf's and errors.New's errors are pointers).
	Unsupported error
	// Inspect: the driver implements Inspector.
	Inspect bool
}

// Notifier is implemented by drivers whose backend can tell waiters that a
// key may have become free. The front-end uses it when the driver's
// Capabilities report Notify.
//
// Without it, waiters sleep on a timer: exponential backoff, each delay
// capped by the remaining lease reported in a *LockedError.
type Notifier interface {
	// Subscribe starts listening for releases of key. Every release of
	// key that happens after Subscribe returns produces a value on the
	// subscription's channel (values may be coalesced), with one
	// exception a driver may make: the release of an exclusive hold that
	// no TryAcquire of key was refused by, so that an uncontended
	// release need not publish. A release that hands the key over to a
	// queued owner (see Request.Queued) may be delivered only through the
	// Driver that queued that owner. The front-end subscribes after a
	// failed attempt and attempts once more before it waits: if that
	// attempt is refused, the hold that refused it is one whose release
	// is delivered, so no release it waits for is missed.
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

// Acquirer is implemented by drivers whose backend keeps a fair wait queue
// of its own, such as create revisions or sequential nodes, so that the
// driver can wait in it. The front-end uses it when the driver's
// Capabilities report Acquire.
//
// The front-end calls Acquire, instead of its own wait loop, after a
// TryAcquire has failed with ErrLocked; within one process only the head of
// the key's line calls it. Once Acquire returns a lease the front-end
// counts its TTL from Lease.Start or, when the driver leaves Start zero,
// calls Refresh on it and counts the lease's TTL from the moment it sent
// that Refresh. Without Acquirer, the front-end waits itself (see Waiting
// in the package documentation).
type Acquirer interface {
	// Acquire waits until req.Key is granted to req.Owner, in the order of
	// the backend's queue, or ctx is done. While it waits it keeps its
	// place alive (a waiter whose own session or lease expires while
	// queued gets an error, never the lock). It returns by ctx's deadline;
	// on error, what it may have left for req.Owner (its queue entry, a
	// grant whose reply was lost) is removed by the front-end's Release
	// with l.Owner = req.Owner and l.Abandoned, in the background, so
	// Acquire need not clean up itself (it may, if that does not delay
	// its return).
	Acquire(ctx context.Context, req Request) (Lease, error)
}

// LossWatcher is implemented by drivers whose backend reports lost leases,
// such as a session expiry or a lease revocation. The front-end uses it
// when the driver's Capabilities report WatchLoss.
//
// Without it the front-end learns of a loss from a renewal the backend
// rejects, or from its local deadline; with it, the loss is declared as
// soon as the backend reports it. Either way the local deadline applies.
type LossWatcher interface {
	// WatchLoss arranges for lost to be called, at most once and from a
	// goroutine of the driver's, when the backend reports that l is gone.
	// lost must not block. After stop returns, lost is not called.
	WatchLoss(l Lease, lost func(err error)) (stop func())
}

// BatchRefresher is implemented by drivers that can renew many leases in
// one round trip. The front-end uses it when the driver's Capabilities
// report RefreshBatch.
//
// Without it, the watchdog calls Refresh once per lease, concurrently.
type BatchRefresher interface {
	// RefreshBatch refreshes each of ls as Refresh would and returns one
	// error per lease, in order: nil when ls[i] was extended to ls[i].TTL,
	// an error wrapping ErrNotHeld when it is no longer held, another error
	// when the outcome is not known. The slice has len(ls) elements.
	RefreshBatch(ctx context.Context, ls []Lease) []error
}

var (
	// ErrLocked means another owner holds the key in a conflicting mode.
	ErrLocked = errors.New("held by another owner")
	// ErrNotHeld means the owner does not hold the key: it expired, was
	// released, or was never granted.
	ErrNotHeld = errors.New("lease not held")
	// ErrClosed means the driver, or the backend client under it, was
	// closed: no call of it can succeed any more. A driver's errors wrap
	// it, marked Permanent, from the moment either is closed (see
	// driverkit.Errors, which does both).
	ErrClosed = errors.New("driver or client closed")
)

// LockedError is the error TryAcquire returns when another owner holds the
// key. It matches ErrLocked with errors.Is.
type LockedError struct {
	// Remaining is how long the conflicting holds may still last on the
	// backend, or 0 when the driver does not know. When a wait queue
	// (Request.Queued) is what blocks the caller, it is how long the entries ahead
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
// the key's live holders agreed on (see Capabilities.Counted).
var ErrLimitMismatch = errors.New("limit differs from the key's holders'")

// LimitError is the error a driver that grants counted requests returns for a request whose Limit
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
