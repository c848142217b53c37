// Package lockertest implements a conformance suite for lock drivers.
//
// Every driver must pass [TestDriver]. A driver package needs one test to
// run the whole suite against its backend:
//
//	func TestConformance(t *testing.T) {
//		lockertest.TestDriver(t, func(t *testing.T) driver.Driver { return newDriver(t) })
//	}
//
// where newDriver returns a new client of the backend under test and closes it
// with t.Cleanup. Options ([WithCloseClient], [WithStall]) give the suite
// hooks into the backend for the checks that need them. Every call must return an independent client (its own
// connection or session) of the same backend, so that the suite can model
// separate processes. The suite uses fresh keys in every run, so it may
// share a server with other tests.
//
// # Writing a driver
//
// Start with the required part of the contract (package
// [github.com/go-locker/locker/driver] explains it): TryAcquire, Refresh
// and Release over the backend. The package's Example (Driver) is a
// complete driver of that kind, a map behind a mutex standing in for the
// backend, and TestDriver passes on it: package locker supplies waiting
// (retries with a backoff capped by [driver.LockedError.Remaining]),
// renewal, loss detection and fairness among the waiters of a process. Run
// the suite with go test -v: the subtests of the parts the driver does not
// have skip, and say so.
//
// Then add what the backend offers, one part at a time. Each is announced
// in the driver's [driver.Capabilities] (implement [driver.Describer]),
// and each has the subtests named below:
//
//  1. The hooks: [WithCloseClient] (a closed client is a permanent error
//     wrapping [driver.ErrClosed]; driverkit.Errors makes it so) and
//     [WithStall] (calls return by their deadline while the backend does
//     not answer) turn on ClosedClient, Stalled and Deadlines.
//  2. TTL limits: MinTTL, MaxTTL and TTLUnit when the backend cannot
//     honour every TTL. The suite picks its TTLs within them (see below);
//     TTLUnit checks that the front-end refuses the others.
//  3. Shared, then Counted and Values (with Inspect): Shared,
//     RWMutexHammer, Counted, CountedHammer, Semaphore, SemaphoreHammer,
//     Values, Election.
//  4. Faster waiting: Notify ([driver.Notifier]) wakes waiters on a
//     release; Queue (Request.Queued) gives waiters in different
//     processes bounded waiting; Acquire ([driver.Acquirer]) waits in the
//     backend's own fair queue. Subtests Notify, Queue, Acquire.
//  5. WatchLoss ([driver.LossWatcher]), RefreshBatch
//     ([driver.BatchRefresher]) and Inspect ([driver.Inspector]), each a
//     subtest of its name; TokenFloor (Request.MinToken), for drivers that
//     a quorum combines, subtest TokenFloor.
//
// Subtest Capabilities checks that every interface the Capabilities name
// is implemented, and logs an implemented one they do not name.
//
// # What it checks
//
// The subtests of group "Driver" call the driver directly and check the
// contract documented in package [github.com/go-locker/locker/driver]:
//
//   - ExclusiveContention: owners racing on several clients for one key;
//     exactly one wins, the others get errors wrapping [driver.ErrLocked]
//     (a [driver.LockedError]'s Remaining at most the winner's TTL).
//   - IdempotentReacquire: TryAcquire by the holder keeps its token and
//     extends the lease.
//   - ReleaseWrongOwner, RefreshWrongOwner: rejected with
//     [driver.ErrNotHeld]; the holder's lease is untouched and no lease is
//     created for the caller.
//   - ReleaseNotHeld: Release and Refresh of keys never acquired, released
//     or re-acquired by someone else fail with ErrNotHeld.
//   - AbandonedRelease: a Release with [driver.Lease].Abandoned frees the
//     owner's grant whatever its token, and fails with ErrNotHeld when the
//     owner holds nothing, leaving another owner's hold alone; one without
//     it and with Token 0 fails with ErrNotHeld and releases nothing.
//   - Expiry: a lease is held until its TTL runs out, then another owner
//     gets the key; the old holder can no longer refresh or release it.
//   - RefreshAfterExpiry: refreshing an expired lease fails and does not
//     bring it back.
//   - RefreshExtends: refreshes keep a lease for Lease.TTL from each refresh.
//   - TokenMonotonic: tokens are never 0 and strictly increase across
//     release, expiry, owners and clients.
//   - ContextCanceled: calls with a done context fail and leave nothing
//     held or queued.
//   - WeirdKeys: keys with slashes, dots, escapes, separators a driver may
//     use for its own names, control characters, look-alike Unicode and
//     512 bytes are all usable, and independent of each other.
//   - ConcurrentMethods: every method from many goroutines at once.
//   - Capabilities: the optional interfaces the [driver.Capabilities]
//     report are implemented; Counted comes with Shared, Values with
//     Inspect; the flags are the same on every call and every client.
//   - Shared (Capabilities.Shared): readers coexist and exclude writers, each
//     with its own token and its own expiry.
//   - Notify ([driver.Notifier]): subscribers hear of releases by any client.
//   - Queue (Capabilities.Queue, Request.Queued): queued owners are served in order and before
//     newcomers, a run of readers at the head together; leaving the queue
//     unblocks the rest; entries expire.
//   - BatchRefresh ([driver.BatchRefresher]): one result per lease.
//   - Acquire ([driver.Acquirer]): a free key is granted at once; waiters
//     on several clients, queued one after the other (250ms apart) behind a
//     holder, are
//     granted the key in that order, one at a time, with growing tokens
//     (and, on a driver that grants Shared, shared waiters together); a waiter whose
//     context ends returns an error wrapping the context's error and
//     leaves nothing held or queued: the waiter behind it, then a
//     newcomer, get the key as soon as it is free.
//   - WatchLoss ([driver.LossWatcher]): the callback is not called for a
//     lease that is refreshed, nor after a normal Release followed by stop,
//     nor after stop; stopping a watch leaves no goroutine behind (the
//     caller's goleak, if any, checks that). Losses themselves (a session
//     that expires, a lease that an administrator revokes) are
//     backend-specific: test them in the driver's own package.
//   - TTLUnit (Capabilities.TTLUnit): the suite's TTLs are whole numbers
//     of it, and package locker refuses, before any call to the driver, a
//     TTL within [MinTTL, MaxTTL] that is not, with an error wrapping
//     locker.ErrInvalidTTL that names the unit (skipped when no such TTL
//     is found).
//   - Counted (Capabilities.Counted): counted Shared holds share a key while
//     their weights fit in the limit, each with its own increasing token; a
//     request with another limit is refused with a *driver.LimitError; on
//     a driver with a wait queue a large waiting request is not overtaken
//     by smaller ones; Inspect reports the limit and the weights.
//   - CountedHammer (Capabilities.Counted): goroutines on three drivers take
//     random weights of one key, each waiting the way the driver offers
//     (Acquire, a queued TryAcquire woken by Subscribe, or TryAcquire
//     retried); the units held, counted by the holders and read by
//     Inspect, never exceed the limit, and the key is free at the end.
//   - TokenFloor (Capabilities.TokenFloor, Request.MinToken): a holder's
//     floor becomes its token, kept by a re-acquire and exceeded by the
//     next grant after its release; a floor asked by a non-holder fails
//     with ErrNotHeld and grants nothing; in each mode the driver grants.
//   - Values (Capabilities.Values): the value of a grant is reported by
//     Inspect while the hold lives, kept by a re-acquire, and gone with
//     the hold.
//   - ClosedClient ([WithCloseClient]): once the backend client under a
//     driver is closed, every call of the driver (optional interfaces
//     included) fails within a second with an error that wraps
//     [driver.ErrClosed] and that driver.IsPermanent reports, and so does
//     an Acquire that was waiting.
//   - Stalled ([WithStall]): while the backend does not answer a driver,
//     every call of it, and an Acquire queued before, returns by its
//     600ms deadline (within 650ms) with the context's error; once the
//     backend answers again and the abandoned owners are released, the
//     key is free and the driver works.
//
// The subtests of group "Locker" run package
// [github.com/go-locker/locker]'s Client, Mutex and RWMutex on top of the
// driver:
//
//   - MutexHammer, RWMutexHammer: many handles on several clients, and
//     goroutines sharing a handle, lock one key over and over; no writer
//     ever overlaps another holder, data written under the lock is seen
//     by the next holder (under the race detector), tokens grow in the
//     order of acquisition, and a writer is not starved by readers.
//   - Mutex: a Mutex hold excludes other handles and owners, and Unlock
//     frees the key.
//   - Renewal: the front-end's renewals keep a Mutex's lease alive on the
//     backend past its TTL.
//   - ContextCanceled: a LockContext that gives up, also as the key is
//     freed, leaves nothing held or queued once the Client's background
//     cleanup is over (the Client's next lock call for the key waits for
//     it).
//   - LossRule: a hold whose lease is released behind its back is lost
//     within a renewal period; another Mutex of the same Client then gets
//     the key at once, while the lost handle waits for its own Unlock,
//     which reports ErrLost.
//   - Close: locker.Client.Close ends and releases every hold, ends a
//     waiting LockContext with ErrClosed, and later calls fail with it.
//   - Deadlines ([WithStall]): with the backend not answering, LockContext
//     with a 600ms deadline returns within 650ms on a free key and while
//     waiting, TryLock within its try timeout, and what the abandoned
//     calls left is cleaned up once the backend answers again: the next
//     LockContext of each key succeeds within half the TTL, before
//     anything left behind could have expired.
//   - ClosedClient ([WithCloseClient]): after the backend client is
//     closed, LockContext returns within a second with an error that
//     wraps driver.ErrClosed and that driver.IsPermanent reports, Lock
//     panics with it, and the hold ends.
//   - MinHold: a hold with locker.WithMinHold that is released at once,
//     or ended by Client.Close, keeps the key from other Clients until
//     its minimum hold has passed, and is then granted to a waiter.
//
// The subtests of optional parts are skipped, with the reason, when the
// driver's Capabilities do not report them, so go test -v shows which
// capabilities were checked. The TTL limits of the Capabilities choose the lease
// lengths the suite uses: short leases (at least 200ms) where a lease must
// expire, medium ones (at least 600ms) refreshed on a schedule, and long
// ones (at least 10s, and 10 times the minimum) where it must not expire;
// each is clamped into the driver's range, so that a driver whose minimum
// and maximum are equal (a TTL tied to a session timeout) gets that one
// TTL everywhere. With a TTLUnit each is rounded up to a whole number of
// units (down, when that would pass the maximum).
//
// # Reading the results
//
// Like [golang.org/x/net/nettest.TestConn], the suite should produce no false
// positives but may produce false negatives: races show up only sometimes.
// Run it under the race detector and more than once (go test -race
// -count=3). Timing checks are judged on the client's monotonic clock from
// the moment a request was sent, so a slow machine makes a check
// inconclusive (it is then logged and skipped) rather than failed.
//
// The subtests that load the CPU run first, one at a time; the others then
// run in parallel (within the limit of go test's -parallel flag), and
// TestDriver returns when all have finished. On a local server the suite
// takes a few seconds, bounded by the lease lengths. Each subtest has a
// time budget; one that exceeds it fails with a message that
// names it, and one that still hangs afterwards panics with every
// goroutine's stack.
package lockertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
)

// MakeDriver returns a new driver for the backend under test. Every call
// must return an independent client (its own connection or session) of the
// same backend, so that the suite can model separate processes: all drivers
// made within one test share lock state. MakeDriver registers its own
// cleanup with t.Cleanup and reports its own failures with t.Fatal.
type MakeDriver func(t *testing.T) driver.Driver

// TestDriver tests that the drivers made by mk satisfy the contract of
// package driver, directly and through package locker's Mutex and RWMutex.
// Optional parts are tested when the driver's Capabilities report them and
// skipped otherwise.
//
// TestDriver returns when all its subtests have finished. Like
// nettest.TestConn it gives no false positives but may give false
// negatives; run it under the race detector with -count > 1.
func TestDriver(t *testing.T, mk MakeDriver, opts ...Option) {
	t.Helper()
	if mk == nil {
		t.Fatal("lockertest: nil MakeDriver")
	}
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	st := suite{mk: mk, o: o}
	t.Run("Driver", func(t *testing.T) {
		// Tests that load the CPU run alone, first; the timed ones then
		// run in parallel, so the suite takes about as long as its
		// longest subtest.
		serial(t, st, "Capabilities", testCapabilities)
		serial(t, st, "ConcurrentMethods", testConcurrentMethods)
		serial(t, st, "ExclusiveContention", testExclusiveContention)
		parallel(t, st, "IdempotentReacquire", testIdempotentReacquire)
		parallel(t, st, "ReleaseWrongOwner", testReleaseWrongOwner)
		parallel(t, st, "RefreshWrongOwner", testRefreshWrongOwner)
		parallel(t, st, "ReleaseNotHeld", testReleaseNotHeld)
		parallel(t, st, "AbandonedRelease", testAbandonedRelease)
		parallel(t, st, "Expiry", testExpiry)
		parallel(t, st, "RefreshAfterExpiry", testRefreshAfterExpiry)
		parallel(t, st, "RefreshExtends", testRefreshExtends)
		parallel(t, st, "TokenMonotonic", testTokenMonotonic)
		parallel(t, st, "ContextCanceled", testContextCanceled)
		parallel(t, st, "WeirdKeys", testWeirdKeys)
		parallel(t, st, "Shared", testShared)
		parallel(t, st, "Notify", testNotify)
		parallel(t, st, "Queue", testQueue)
		parallel(t, st, "BatchRefresh", testBatchRefresh)
		parallel(t, st, "Acquire", testAcquire)
		parallel(t, st, "WatchLoss", testWatchLoss)
		parallel(t, st, "TTLUnit", testTTLUnit)
		parallel(t, st, "Inspect", testInspect)
		parallel(t, st, "Counted", testCounted)
		serial(t, st, "CountedHammer", testCountedHammer)
		parallel(t, st, "Values", testValues)
		parallel(t, st, "TokenFloor", testTokenFloor)
		parallel(t, st, "ClosedClient", testDriverClosedClient)
		parallel(t, st, "Stalled", testDriverStalled)
	})
	t.Run("Locker", func(t *testing.T) {
		serial(t, st, "MutexHammer", testMutexHammer)
		serial(t, st, "RWMutexHammer", testRWMutexHammer)
		parallel(t, st, "Mutex", testMutexBasics)
		parallel(t, st, "Renewal", testMutexRenewal)
		parallel(t, st, "ContextCanceled", testLockerContextCanceled)
		parallel(t, st, "LossRule", testLossRule)
		parallel(t, st, "Close", testClientClose)
		parallel(t, st, "Deadlines", testDeadlines)
		parallel(t, st, "ClosedClient", testClosedClient)
		parallel(t, st, "MinHold", testMinHold)
	})
	t.Run("Recipes", func(t *testing.T) {
		serial(t, st, "SemaphoreHammer", testSemaphoreHammer)
		serial(t, st, "MultiLockHammer", testMultiLock)
		parallel(t, st, "Semaphore", testSemaphore)
		parallel(t, st, "Election", testElection)
		parallel(t, st, "LeaderLatch", testLeaderLatch)
	})
}

// An Option configures TestDriver with hooks into the backend under test.
type Option func(*options)

type options struct {
	closeClient func(t *testing.T, d driver.Driver)
	stall       func(t *testing.T, d driver.Driver) (resume func())
}

// WithCloseClient gives the suite a way to close the backend client under
// a driver made by MakeDriver (redis.Client.Close, clientv3.Client.Close,
// zk.Conn.Close, sql.DB.Close…). Subtests Driver/ClosedClient and
// Locker/ClosedClient then check that a closed client is a permanent
// error: every call of the driver returns promptly with an error that
// wraps driver.ErrClosed and that driver.IsPermanent reports, and
// locker's Lock panics with it at once instead of retrying for ever.
// Without it the subtest is skipped.
func WithCloseClient(f func(t *testing.T, d driver.Driver)) Option {
	return func(o *options) { o.closeClient = f }
}

// WithStall gives the suite a way to make the backend stop answering one
// driver made by MakeDriver, as a black-holed network or a paused server
// does, until the returned resume function is called (a proxy in front of
// each driver's connection serves; memdriver's Block and Unblock are the
// model). Subtest Locker/Deadlines then checks that locker's calls return
// by their context's deadline while the backend does not answer: a
// LockContext with a 600ms deadline within 650ms, on a free key and while
// waiting for a held one, and TryLock within its try timeout. Without it
// the subtest is skipped.
func WithStall(f func(t *testing.T, d driver.Driver) (resume func())) Option {
	return func(o *options) { o.stall = f }
}

// suite is what every subtest gets: the MakeDriver and the options.
type suite struct {
	mk MakeDriver
	o  options
}

func serial(t *testing.T, st suite, name string, f func(*env)) {
	t.Helper()
	t.Run(name, func(t *testing.T) { f(newEnv(t, st)) })
}

func parallel(t *testing.T, st suite, name string, f func(*env)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		f(newEnv(t, st))
	})
}

// Lease lengths and timing tolerances.
const (
	shortFloor  = 200 * time.Millisecond // leases that must expire
	mediumFloor = 600 * time.Millisecond // leases refreshed on a schedule
	longFloor   = 10 * time.Second       // leases that must not expire
	// expiryGrace bounds how late after its TTL a backend may free a
	// key (etcd revokes expired leases in a periodic sweep).
	expiryGrace = 3 * time.Second
	// budget is the time a subtest may take beyond its leases.
	budget = 45 * time.Second
	// hangGrace is how long a subtest that has exceeded its budget may
	// take to return after its context was cancelled before the suite
	// panics.
	hangGrace = 20 * time.Second
)

// env is the state of one subtest: its drivers, keys, lease lengths and
// watchdog.
type env struct {
	t  *testing.T
	mk MakeDriver
	// ctx is passed to every driver call; the watchdog cancels it when
	// the subtest exceeds its budget.
	ctx context.Context
	// d is the first driver of the subtest, used to discover
	// capabilities and TTL limits.
	d driver.Driver
	// caps are d's Capabilities.
	caps   driver.Capabilities
	opts   options
	prefix string
	errs   atomic.Int32 // reported by errorf
	short  time.Duration
	medium time.Duration
	long   time.Duration
	// budget is how long the subtest may take before the watchdog
	// cancels it; outlast, a TTL at least that long (unless the
	// driver's MaxTTL is shorter).
	budget, outlast time.Duration
}

func newEnv(t *testing.T, st suite) *env {
	t.Helper()
	e := &env{t: t, mk: st.mk, opts: st.o}
	setBudget := e.watchdog()
	e.d = e.driver()
	e.caps = driver.CapabilitiesOf(e.d)
	lo, hi := e.ttlRange()
	e.short = e.pickTTL(shortFloor, lo, hi)
	e.medium = e.pickTTL(mediumFloor, lo, hi)
	e.long = e.pickTTL(max(longFloor, 10*lo), lo, hi)
	e.prefix = keyPrefix(t.Name())
	e.budget = budget + 4*e.medium + 2*e.short + expiryGrace
	// Leases that outlast the subtest: the watchdog ends it first.
	e.outlast = e.pickTTL(max(e.long, e.budget+hangGrace), lo, hi)
	setBudget(e.budget)
	return e
}

// ttlRange returns the driver's TTL limits (Capabilities MinTTL and
// MaxTTL; 0 where there is none).
func (e *env) ttlRange() (lo, hi time.Duration) {
	e.t.Helper()
	lo, hi = e.caps.MinTTL, e.caps.MaxTTL
	if lo < 0 || hi < 0 || (hi > 0 && hi < lo) || e.caps.TTLUnit < 0 {
		e.t.Fatalf("Capabilities() MinTTL %v, MaxTTL %v, TTLUnit %v; want 0 <= MinTTL <= MaxTTL (or MaxTTL 0) and TTLUnit >= 0", lo, hi, e.caps.TTLUnit)
	}
	return lo, hi
}

// pickTTL returns the TTL the suite uses where it wants one of at least
// floor: floor itself, clamped into [lo, hi] (so every TTL is hi when
// lo == hi), and, on a driver with a TTLUnit, rounded up to a whole number
// of units (down, when that would pass hi). It fails the test when no such
// TTL is within [lo, hi].
func (e *env) pickTTL(floor, lo, hi time.Duration) time.Duration {
	e.t.Helper()
	d := max(floor, lo)
	if hi > 0 {
		d = min(d, hi)
	}
	u := e.caps.TTLUnit
	if u <= 0 || d%u == 0 {
		return d
	}
	up, down := (d/u+1)*u, d/u*u
	switch {
	case hi <= 0 || up <= hi:
		return up
	case down >= lo && down > 0:
		return down
	}
	e.t.Fatalf("lockertest: no whole number of the TTLUnit %v of at least %v within [%v, %v]", u, floor, lo, hi)
	return 0
}

// watchdog cancels e.ctx and fails the test when it exceeds its budget,
// and panics with all goroutines' stacks if it then still does not return.
// It returns a function that sets the budget, counted from the start.
func (e *env) watchdog() (setBudget func(time.Duration)) {
	t := e.t
	ctx, cancel := context.WithCancel(context.Background())
	e.ctx = ctx
	var (
		mu    sync.Mutex
		done  bool
		limit = budget
		hard  *time.Timer
		start = time.Now()
	)
	soft := time.AfterFunc(limit, func() {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		t.Errorf("lockertest: %s did not finish within %v; cancelling its context", t.Name(), limit)
		cancel()
		hard = time.AfterFunc(hangGrace, func() {
			mu.Lock()
			finished := done
			mu.Unlock()
			if !finished {
				debug.SetTraceback("all")
				panic(fmt.Sprintf("lockertest: %s still hangs %v after its context was cancelled", t.Name(), hangGrace))
			}
		})
	})
	t.Cleanup(func() {
		mu.Lock()
		done = true
		soft.Stop()
		if hard != nil {
			hard.Stop()
		}
		mu.Unlock()
		cancel()
	})
	return func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		if soft.Stop() {
			limit = d
			soft.Reset(d - time.Since(start))
		}
	}
}

// maxErrors is how many errors errorf reports in full per subtest.
const maxErrors = 10

// errorf is t.Errorf for loops that may fail many times over: after
// maxErrors errors it only marks the test failed.
func (e *env) errorf(format string, args ...any) {
	e.t.Helper()
	switch n := e.errs.Add(1); {
	case n <= maxErrors:
		e.t.Errorf(format, args...)
	case n == maxErrors+1:
		e.t.Errorf("(more errors follow; not reported)")
	default:
		e.t.Fail()
	}
}

// driver returns a new client of the backend under test.
func (e *env) driver() driver.Driver {
	e.t.Helper()
	d := e.mk(e.t)
	if d == nil {
		e.t.Fatal("MakeDriver returned nil")
	}
	return d
}

// drivers returns the subtest's first driver followed by n-1 new ones.
func (e *env) drivers(n int) []driver.Driver {
	e.t.Helper()
	ds := []driver.Driver{e.d}
	for len(ds) < n {
		ds = append(ds, e.driver())
	}
	return ds
}

// maxKeyPrefix leaves room in a 512-byte key for a suffix.
const maxKeyPrefix = 160

// keyPrefix returns a prefix unique to this run of the named test.
func keyPrefix(name string) string {
	var b [8]byte
	rand.Read(b[:])
	const room = maxKeyPrefix - len("lockertest//-") - 2*len(b)
	name = strings.ReplaceAll(name, "\x00", "")
	if len(name) > room {
		name = name[len(name)-room:]
	}
	return "lockertest/" + strings.ToValidUTF8(name, "") + "/" + hex.EncodeToString(b[:]) + "-"
}

// key returns a key unique to this subtest.
func (e *env) key(name string) string { return e.prefix + name }

// newOwner returns a fresh owner as the front-end makes them: 32 hex digits.
func newOwner() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// req returns a request for key by a new owner.
func req(key string, mode driver.Mode, ttl time.Duration) driver.Request {
	return driver.Request{Key: key, Owner: newOwner(), Mode: mode, TTL: ttl}
}

// guard is the tolerance for clock granularity when judging whether a
// lease of length ttl was still valid.
func guard(ttl time.Duration) time.Duration { return 5*time.Millisecond + ttl/50 }

// validTTL is the shorter of the requested TTL and the one the backend
// reports it granted: the lease is valid at least that long from the
// moment it was requested.
func validTTL(r driver.Request, l driver.Lease) time.Duration { return min(r.TTL, l.TTL) }

// grantedTTL is the longer of the requested TTL and the one the backend
// reports it granted.
func grantedTTL(r driver.Request, l driver.Lease) time.Duration { return max(r.TTL, l.TTL) }

// acquire calls TryAcquire and fails the test unless it succeeds with a
// lease that matches r. It returns the lease and the time from which it is
// valid for at least r.TTL: the time the request was sent, or the lease's
// Start if that is earlier.
func (e *env) acquire(d driver.Driver, r driver.Request) (driver.Lease, time.Time) {
	e.t.Helper()
	var sent time.Time
	l, err := retryOnce(e, "TryAcquire("+fmtReq(r)+")", func() (driver.Lease, error) {
		sent = time.Now()
		return d.TryAcquire(e.ctx, r)
	})
	if err != nil {
		e.t.Fatalf("TryAcquire(%s): %v", fmtReq(r), err)
	}
	e.checkLease("TryAcquire", r, l)
	return l, validFrom(l, sent)
}

// retryOnce calls f, and once more, logging the first error, when f fails
// with a transient error: neither a refusal, nor ErrNotHeld, nor
// permanent. A loaded machine may make one request miss a driver's
// timeouts (a quorum's member timeout is TTL/10: 60ms for a 600ms lease),
// and the front-end retries such a request with the same owner; two
// transient failures in a row are the driver's.
func retryOnce[T any](e *env, what string, f func() (T, error)) (T, error) {
	e.t.Helper()
	v, err := f()
	if err == nil || errors.Is(err, driver.ErrLocked) || errors.Is(err, driver.ErrNotHeld) ||
		driver.IsPermanent(err) || e.ctx.Err() != nil {
		return v, err
	}
	e.t.Logf("%s: %v; retrying once", what, err)
	return f()
}

// validFrom is the time from which l is valid for its TTL, given that the
// request that returned it was sent at sent.
func validFrom(l driver.Lease, sent time.Time) time.Time {
	if !l.Start.IsZero() && l.Start.Before(sent) {
		return l.Start
	}
	return sent
}

// acquireQueued is acquire with Request.Queued.
func (e *env) acquireQueued(d driver.Driver, r driver.Request) (driver.Lease, time.Time) {
	e.t.Helper()
	r.Queued = true
	var sent time.Time
	l, err := retryOnce(e, "TryAcquire("+fmtReq(r)+")", func() (driver.Lease, error) {
		sent = time.Now()
		return d.TryAcquire(e.ctx, r)
	})
	if err != nil {
		e.t.Fatalf("TryAcquire(%s): %v", fmtReq(r), err)
	}
	e.checkLease("TryAcquire", r, l)
	return l, validFrom(l, sent)
}

// tryQueued is TryAcquire with Request.Queued.
func tryQueued(ctx context.Context, d driver.Driver, r driver.Request) (driver.Lease, error) {
	r.Queued = true
	return d.TryAcquire(ctx, r)
}

// checkLease reports fields of a granted lease that do not match r.
func (e *env) checkLease(op string, r driver.Request, l driver.Lease) {
	e.t.Helper()
	if l.Key != r.Key || l.Owner != r.Owner || l.Mode != r.Mode {
		e.t.Errorf("%s(%s) = lease{Key: %q, Owner: %q, Mode: %v}; want the request's key, owner and mode", op, fmtReq(r), l.Key, l.Owner, l.Mode)
	}
	if l.Token == 0 {
		e.t.Errorf("%s(%s) granted token 0", op, fmtReq(r))
	}
	if l.TTL <= 0 {
		e.t.Errorf("%s(%s) granted TTL %v; want > 0", op, fmtReq(r), l.TTL)
	}
}

// refresh calls Refresh and fails the test unless it succeeds with the same
// token. It returns the new lease and the time the request was sent.
func (e *env) refresh(d driver.Driver, l driver.Lease) (driver.Lease, time.Time) {
	e.t.Helper()
	var sent time.Time
	nl, err := retryOnce(e, "Refresh("+fmtLease(l)+")", func() (driver.Lease, error) {
		sent = time.Now()
		return d.Refresh(e.ctx, l)
	})
	if err != nil {
		e.t.Fatalf("Refresh(%s): %v", fmtLease(l), err)
	}
	if nl.Token != l.Token || nl.Key != l.Key || nl.Owner != l.Owner || nl.Mode != l.Mode {
		e.t.Errorf("Refresh(%s) = %s; want the same key, owner, mode and token", fmtLease(l), fmtLease(nl))
	}
	return nl, sent
}

// release calls Release and fails the test unless it succeeds. After a
// transient failure, the retry may find the lease released by the first
// call: ErrNotHeld then counts as success.
func (e *env) release(d driver.Driver, l driver.Lease) {
	e.t.Helper()
	e.releaseOrGone(d, l, func() bool { return false })
}

// releaseAfterChecks is release for a lease whose checks are done, valid
// from validFrom for ttl: once it may have run out, ErrNotHeld counts as
// success too, since the backend let it go on its own (a loaded machine
// can take that long over the checks before it).
func (e *env) releaseAfterChecks(d driver.Driver, l driver.Lease, validFrom time.Time, ttl time.Duration) {
	e.t.Helper()
	e.releaseOrGone(d, l, func() bool { return !withinLease(validFrom, ttl) })
}

// releaseOrGone is release, where ErrNotHeld also counts as success when
// gone reports true.
func (e *env) releaseOrGone(d driver.Driver, l driver.Lease, gone func() bool) {
	e.t.Helper()
	retried := false
	_, err := retryOnce(e, "Release("+fmtLease(l)+")", func() (struct{}, error) {
		err := d.Release(e.ctx, l)
		if (retried || gone()) && errors.Is(err, driver.ErrNotHeld) {
			err = nil
		}
		retried = true
		return struct{}{}, err
	})
	if err != nil {
		e.t.Fatalf("Release(%s): %v", fmtLease(l), err)
	}
}

// wantNotHeld reports err unless it wraps driver.ErrNotHeld.
func (e *env) wantNotHeld(op string, err error) {
	e.t.Helper()
	if !errors.Is(err, driver.ErrNotHeld) {
		e.t.Errorf("%s: got error %v; want an error wrapping driver.ErrNotHeld", op, err)
	}
}

// refreshNotHeld checks that Refresh of l through d fails with ErrNotHeld.
// A transient failure is retried once (see retryOnce): a Refresh that
// is refused changes nothing, so asking again is the front-end's answer
// to a driver that could not tell in time, as when 3 of a quorum of 5
// members missed a short lease's member timeout on a loaded machine.
func (e *env) refreshNotHeld(op string, d driver.Driver, l driver.Lease) {
	e.t.Helper()
	_, err := retryOnce(e, op, func() (driver.Lease, error) { return d.Refresh(e.ctx, l) })
	e.wantNotHeld(op, err)
}

// releaseNotHeld checks that Release of l through d fails with ErrNotHeld,
// retrying a transient failure once, as refreshNotHeld does.
func (e *env) releaseNotHeld(op string, d driver.Driver, l driver.Lease) {
	e.t.Helper()
	_, err := retryOnce(e, op, func() (struct{}, error) { return struct{}{}, d.Release(e.ctx, l) })
	e.wantNotHeld(op, err)
}

// expectLocked checks that a new owner cannot acquire key in mode through
// d, because a conflicting lease of length ttl, valid from validFrom, is
// held. A grant is a failure when it returns before that lease can have
// expired, and inconclusive after. It returns the error TryAcquire
// returned.
func (e *env) expectLocked(d driver.Driver, key string, mode driver.Mode, validFrom time.Time, ttl time.Duration) error {
	e.t.Helper()
	return e.expectLockedReq(d, req(key, mode, e.long), validFrom, ttl)
}

// expectLockedReq is expectLocked for any request r.
func (e *env) expectLockedReq(d driver.Driver, r driver.Request, validFrom time.Time, ttl time.Duration) error {
	e.t.Helper()
	l, err := d.TryAcquire(e.ctx, r)
	if err == nil {
		defer d.Release(e.ctx, l)
		if time.Since(validFrom) < ttl-guard(ttl) {
			e.t.Errorf("TryAcquire(%s) by a new owner succeeded (token %d) while a conflicting lease was held", fmtReq(r), l.Token)
		} else {
			e.inconclusive("a lease was expected to be held, but the machine was too slow to check it in time")
		}
		return nil
	}
	e.checkLocked(r, err, ttl)
	return err
}

// checkLocked reports err unless it is a conflict with a lease that has at
// most ttl left.
func (e *env) checkLocked(r driver.Request, err error, ttl time.Duration) {
	e.t.Helper()
	if !errors.Is(err, driver.ErrLocked) {
		e.t.Errorf("TryAcquire(%s): got error %v; want an error wrapping driver.ErrLocked", fmtReq(r), err)
		return
	}
	var le *driver.LockedError
	if errors.As(err, &le) && (le.Remaining < 0 || le.Remaining > ttl) {
		e.t.Errorf("TryAcquire(%s): LockedError.Remaining = %v; want between 0 and the holder's TTL %v", fmtReq(r), le.Remaining, ttl)
	}
}

// expectFree checks that a new owner can acquire key at once, and releases
// it again. It returns the token granted.
func (e *env) expectFree(d driver.Driver, key string, mode driver.Mode, why string) uint64 {
	e.t.Helper()
	r := req(key, mode, e.long)
	l, err := retryOnce(e, "TryAcquire("+fmtReq(r)+")", func() (driver.Lease, error) { return d.TryAcquire(e.ctx, r) })
	if err != nil {
		e.t.Errorf("%s: TryAcquire(%s) by a new owner: %v; want the key free", why, fmtReq(r), err)
		return 0
	}
	e.checkLease("TryAcquire", r, l)
	e.release(d, l)
	return l.Token
}

// acquireAfterExpiry polls TryAcquire(r) until it succeeds once the
// conflicting lease l, granted for hr and sent at sent and confirmed at
// confirmed, has expired. A grant before l can have expired is a failure,
// and so is none by expiryGrace after it. It returns the lease and the time
// its request was sent.
func (e *env) acquireAfterExpiry(d driver.Driver, r driver.Request, hr driver.Request, l driver.Lease, sent, confirmed time.Time) (driver.Lease, time.Time, bool) {
	e.t.Helper()
	valid, ttl := validTTL(hr, l), grantedTTL(hr, l)
	deadline := confirmed.Add(ttl + max(expiryGrace, ttl))
	for {
		s := time.Now()
		nl, err := d.TryAcquire(e.ctx, r)
		if err == nil {
			if withinLease(sent, valid) {
				e.t.Errorf("TryAcquire(%s) succeeded %v after a conflicting lease of %v was requested; want the lease held until it expires", fmtReq(r), time.Since(sent), valid)
			}
			e.checkLease("TryAcquire", r, nl)
			return nl, s, true
		}
		if !errors.Is(err, driver.ErrLocked) {
			e.t.Errorf("TryAcquire(%s) while waiting for a lease to expire: %v", fmtReq(r), err)
			return driver.Lease{}, s, false
		}
		if time.Now().After(deadline) {
			e.t.Errorf("TryAcquire(%s) still fails %v after a conflicting lease of %v was granted: %v; want the lease expired", fmtReq(r), time.Since(confirmed), ttl, err)
			return driver.Lease{}, s, false
		}
		if !e.sleep(10 * time.Millisecond) {
			return driver.Lease{}, s, false
		}
	}
}

// sleep waits for d or until the subtest's context ends, and reports
// whether it waited the whole time.
func (e *env) sleep(d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-e.ctx.Done():
		return false
	}
}

// sleepUntil waits until t.
func (e *env) sleepUntil(t time.Time) bool { return e.sleep(time.Until(t)) }

// inconclusive skips the rest of the subtest because a timing condition it
// needs could not be met on this machine.
func (e *env) inconclusive(why string) {
	e.t.Helper()
	e.t.Skipf("inconclusive: %s", why)
}

// withinLease reports whether a lease of length ttl requested at sent is
// certainly still valid now.
func withinLease(sent time.Time, ttl time.Duration) bool {
	return time.Since(sent) < ttl-guard(ttl)
}

// skipUnless skips the subtest unless the driver's Capabilities report
// the capability named what.
func (e *env) skipUnless(ok bool, what string) {
	e.t.Helper()
	if !ok {
		e.t.Skipf("driver %T does not report %s in its driver.Capabilities", e.d, what)
	}
}

// sharer reports whether the subtest's drivers grant Mode Shared.
func (e *env) sharer() bool { return e.caps.Shared }

// skipUnlessShared skips the subtest unless the drivers grant Mode Shared.
func (e *env) skipUnlessShared() {
	e.t.Helper()
	e.skipUnless(e.caps.Shared, "Shared")
}

func fmtReq(r driver.Request) string {
	q := ""
	if r.Queued {
		q = ", Queued: true"
	}
	if r.Limit > 0 {
		return fmt.Sprintf("{Key: %q, Owner: %.8s…, Mode: %v, TTL: %v, Limit: %d, Weight: %d%s}", r.Key, r.Owner, r.Mode, r.TTL, r.Limit, r.Weight, q)
	}
	return fmt.Sprintf("{Key: %q, Owner: %.8s…, Mode: %v, TTL: %v%s}", r.Key, r.Owner, r.Mode, r.TTL, q)
}

func fmtLease(l driver.Lease) string {
	return fmt.Sprintf("{Key: %q, Owner: %.8s…, Mode: %v, Token: %d, TTL: %v}", l.Key, l.Owner, l.Mode, l.Token, l.TTL)
}

// claimed returns d as the optional interface T when the Capabilities
// report it, and the zero T (a nil interface) otherwise. A driver that
// reports the capability without implementing T fails the test.
func claimed[T any](e *env, d driver.Driver) T {
	e.t.Helper()
	var zero T
	var flag bool
	var name string
	switch any(&zero).(type) {
	case *driver.Notifier:
		flag, name = e.caps.Notify, "Notify"
	case *driver.Acquirer:
		flag, name = e.caps.Acquire, "Acquire"
	case *driver.LossWatcher:
		flag, name = e.caps.WatchLoss, "WatchLoss"
	case *driver.BatchRefresher:
		flag, name = e.caps.RefreshBatch, "RefreshBatch"
	case *driver.Inspector:
		flag, name = e.caps.Inspect, "Inspect"
	}
	if !flag {
		return zero
	}
	v, ok := d.(T)
	if !ok {
		e.t.Fatalf("driver %T reports %s in its Capabilities but does not implement driver.%s", d, name, reflect.TypeFor[T]().Name())
	}
	return v
}
