package quorumdriver

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
	"github.com/go-locker/locker/internal/limbo"
)

// The TTLs the driver accepts, within those of its members.
const (
	// MinTTL is the shortest TTL the driver accepts, whatever its
	// members accept: shorter leases leave no time for a round of
	// requests and the clock-drift allowance.
	MinTTL = 20 * time.Millisecond
)

// Timeouts of member requests, when Options leaves them zero.
const (
	// DefaultMemberTimeoutFloor is the shortest default member timeout
	// (see Options.MemberTimeout), for TTLs under 250ms; it is never more
	// than a third of the TTL.
	DefaultMemberTimeoutFloor = 25 * time.Millisecond
	// DefaultUntimedTimeout bounds the member requests of calls that have
	// no TTL to derive a timeout from (Subscribe, a Release whose lease has
	// no TTL).
	DefaultUntimedTimeout = time.Second
)

// ErrTooFewMembers is returned by New for fewer than one member, and is
// wrapped by the errors of calls that reached fewer members than a
// majority needs.
var ErrTooFewMembers = errors.New("too few members")

// ErrNoTokenFloor is returned, wrapped, by New for a member whose
// Capabilities do not report TokenFloor.
var ErrNoTokenFloor = errors.New("member does not raise token floors (driver.Capabilities.TokenFloor)")

// ErrValidity is wrapped by the errors of grants and renewals that a
// majority confirmed too late: after the lease's validity (its TTL minus
// the time the requests took and the clock-drift allowance) had run out.
var ErrValidity = errors.New("majority confirmed after the lease's validity ran out")

// Options configures a Driver. The zero value is the default.
type Options struct {
	// MemberTimeout bounds each request to one member: a member that does
	// not answer within it counts as failed. Zero: TTL/10, but at least
	// DefaultMemberTimeoutFloor and at most TTL/3; DefaultUntimedTimeout
	// for calls without a TTL. A positive value applies to every call;
	// it should stay well below the TTL, since a grant must be confirmed
	// within the lease's validity. When fewer than a majority answered a
	// grant, a renewal or a token write-back within it (as when the
	// calling process stalls), the members that did not are asked once
	// more, until TTL/3 (or the member timeout, if longer) after the
	// first requests.
	MemberTimeout time.Duration
}

// Driver is a quorum of independent member drivers; see the package doc.
// Create one with New. It implements driver.Driver, driver.Describer and
// driver.Notifier; its Capabilities say what the members have in common
// (see Capabilities).
type Driver struct {
	members []driver.Driver
	all     []int // the indexes of every member, read only
	quorum  int
	opts    Options
	caps    driver.Capabilities // what every member can do, see Capabilities
	limbo   limbo.Set           // grants whose give-back is in doubt
}

var (
	_ driver.Driver    = (*Driver)(nil)
	_ driver.Describer = (*Driver)(nil)
	_ driver.Notifier  = (*Driver)(nil)
)

// New returns a driver over members, which must be independent backends
// (separate servers: two members on one server would count twice) whose
// Capabilities all report TokenFloor. A majority is len(members)/2 + 1.
// opts may be nil. The caller keeps ownership of the members: it closes
// their clients, after which every call of the driver fails with a
// permanent error.
func New(members []driver.Driver, opts *Options) (*Driver, error) {
	if len(members) == 0 {
		return nil, fmt.Errorf("quorumdriver: %w: none given", ErrTooFewMembers)
	}
	d := &Driver{
		members: append([]driver.Driver(nil), members...),
		all:     make([]int, len(members)),
		quorum:  len(members)/2 + 1,
	}
	if opts != nil {
		d.opts = *opts
	}
	if d.opts.MemberTimeout < 0 {
		return nil, fmt.Errorf("quorumdriver: negative MemberTimeout %v", d.opts.MemberTimeout)
	}
	for i, m := range members {
		if m == nil {
			return nil, fmt.Errorf("quorumdriver: member %d is nil", i)
		}
		if !driver.CapabilitiesOf(m).TokenFloor {
			return nil, fmt.Errorf("quorumdriver: member %d (%T): %w", i, m, ErrNoTokenFloor)
		}
		d.all[i] = i
	}
	caps, err := common(members)
	if err != nil {
		return nil, err
	}
	d.caps = caps
	return d, nil
}

// common returns what every one of members can do, as the quorum's
// Capabilities: Shared, Queue and Notify when every member reports them;
// the TTLs every member accepts, and at least MinTTL.
func common(members []driver.Driver) (driver.Capabilities, error) {
	c := driver.Capabilities{Shared: true, Queue: true, Notify: true, MinTTL: MinTTL}
	for _, m := range members {
		mc := driver.CapabilitiesOf(m)
		c.Shared = c.Shared && mc.Shared
		c.Queue = c.Queue && mc.Queue
		c.Notify = c.Notify && mc.Notify
		c.MinTTL = max(c.MinTTL, mc.MinTTL)
		if mc.MaxTTL > 0 && (c.MaxTTL == 0 || mc.MaxTTL < c.MaxTTL) {
			c.MaxTTL = mc.MaxTTL
		}
		if mc.TTLUnit > 0 {
			c.TTLUnit = lcm(max(c.TTLUnit, 1), mc.TTLUnit)
		}
	}
	if c.MaxTTL > 0 && c.MinTTL > c.MaxTTL {
		return c, fmt.Errorf("quorumdriver: the members accept no common TTL (at least %v, at most %v)", c.MinTTL, c.MaxTTL)
	}
	return c, nil
}

// lcm returns the least common multiple of a and b, both positive.
func lcm(a, b time.Duration) time.Duration {
	x, y := a, b
	for y != 0 {
		x, y = y, x%y
	}
	return a / x * b
}

// Members returns the number of members.
func (d *Driver) Members() int { return len(d.members) }

// Quorum returns the number of members that make a majority.
func (d *Driver) Quorum() int { return d.quorum }

// Capabilities implements driver.Describer: Mode Shared, queued requests
// (Request.Queued, passed to every member) and notifications (Subscribe)
// when every member reports them; the TTLs every member accepts (the
// longest minimum, at least MinTTL; the shortest maximum; a TTLUnit that
// is a whole number of every member's). The quorum grants no counted
// requests, keeps no values, and takes no token floor itself.
func (d *Driver) Capabilities() driver.Capabilities { return d.caps }

// Drift returns the clock-drift allowance for a lease of ttl: ttl/100 +
// 2ms. A grant is valid for its TTL minus the time its requests took and
// minus this allowance, counted from the moment the first member request
// was sent.
func Drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// memberTimeout returns the timeout of one member request for a lease of
// ttl (0: unknown).
func (d *Driver) memberTimeout(ttl time.Duration) time.Duration {
	if d.opts.MemberTimeout > 0 {
		return d.opts.MemberTimeout
	}
	if ttl <= 0 {
		return DefaultUntimedTimeout
	}
	return min(max(ttl/10, DefaultMemberTimeoutFloor), ttl/3)
}

// result is the outcome of one member request.
type result[T any] struct {
	v   T
	err error
}

// fanOut calls f for each member index in idx, all in parallel, under one
// context that ends timeout from now (or with ctx, if that is sooner),
// and returns when all have returned. The last call runs in the calling
// goroutine, so a call to one member spawns no goroutine.
func fanOut[T any](ctx context.Context, timeout time.Duration, idx []int, f func(ctx context.Context, i int) (T, error)) []result[T] {
	rs := make([]result[T], len(idx))
	if len(idx) == 0 {
		return rs
	}
	mctx := ctx
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > timeout {
		var cancel context.CancelFunc
		mctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var wg sync.WaitGroup
	last := len(idx) - 1
	for j, i := range idx[:last] {
		wg.Go(func() {
			v, err := f(mctx, i)
			rs[j] = result[T]{v, err}
		})
	}
	v, err := f(mctx, idx[last])
	rs[last] = result[T]{v, err}
	wg.Wait()
	return rs
}

// limit returns how long the requests of one call may take in all for a
// lease of ttl, when fewer than a majority answered within the member
// timeout (see fanOutMajority): TTL/3, or the member timeout if longer.
func (d *Driver) limit(ttl time.Duration) time.Duration {
	return max(d.memberTimeout(ttl), ttl/3)
}

// fanOutMajority is fanOut, which gives each member timeout, followed,
// when fewer than need members answered (a grant, a refusal, ErrNotHeld or
// a permanent error), by one more request to each member that did not,
// for what is left of limit, counted from the first requests. The member
// timeout keeps a member that is down from slowing every call once a
// majority answered; when a majority did not, as when the calling process
// or the network stalled for longer than the member timeout, the call
// would fail anyway, and waiting longer for an answer is all it can do.
// The requests it repeats must be idempotent for the same owner.
func fanOutMajority[T any](ctx context.Context, timeout, limit time.Duration, need int, idx []int, f func(ctx context.Context, i int) (T, error)) []result[T] {
	start := time.Now()
	rs := fanOut(ctx, timeout, idx, f)
	var again []int
	for j, r := range rs {
		if answered(r.err) {
			need--
		} else {
			again = append(again, j)
		}
	}
	left := limit - time.Since(start)
	if need <= 0 || len(again) == 0 || left <= 0 || ctx.Err() != nil {
		return rs
	}
	sub := make([]int, len(again))
	for k, j := range again {
		sub[k] = idx[j]
	}
	for k, r := range fanOut(ctx, left, sub, f) {
		rs[again[k]] = r
	}
	return rs
}

// answered reports whether err, a member's reply, is an answer to the
// request: nil, a refusal, ErrNotHeld, or a permanent error.
func answered(err error) bool {
	return err == nil || errors.Is(err, driver.ErrLocked) || errors.Is(err, driver.ErrNotHeld) || driver.IsPermanent(err)
}

// tally sorts member errors: how many were ErrNotHeld or ErrLocked, how
// many permanent, and the joined error of the failed members.
type tally struct {
	notHeld   int
	locked    int
	permanent int
	closed    int           // of the permanent ones, those wrapping driver.ErrClosed
	remaining time.Duration // the longest LockedError.Remaining
	errs      MemberErrors
}

// tallyOf sorts the errors of rs into a tally and returns it with the
// indices of the members that succeeded.
func tallyOf[T any](rs []result[T]) (t tally, ok []int) {
	for i, r := range rs {
		if r.err != nil {
			t.add(i, r.err)
		} else {
			ok = append(ok, i)
		}
	}
	return t, ok
}

func (t *tally) add(i int, err error) {
	switch {
	case errors.Is(err, driver.ErrNotHeld):
		t.notHeld++
	case errors.Is(err, driver.ErrLocked):
		t.locked++
		var le *driver.LockedError
		if errors.As(err, &le) {
			t.remaining = max(t.remaining, le.Remaining)
		}
	case driver.IsPermanent(err):
		t.permanent++
		if errors.Is(err, driver.ErrClosed) {
			t.closed++
		}
	}
	t.errs = append(t.errs, MemberError{Member: i, Err: err})
}

// MemberError is what one member answered a call that failed on it.
type MemberError struct {
	Member int // the member's index in the slice given to New
	Err    error
}

// Error returns "member i: " and the member's error.
// Error returns "member i: " and the member's error.
func (e MemberError) Error() string { return fmt.Sprintf("member %d: %v", e.Member, e.Err) }

// MemberErrors lists the members' answers in the error of a call that
// did not reach a majority. errors.As finds it, but it does not wrap the
// members' errors: errors.Is and driver.IsPermanent report what the
// quorum decided (a majority's ErrNotHeld, a refusal, more than N −
// majority permanent failures), never what one member said.
type MemberErrors []MemberError

// Error returns the members' errors, separated by "; ".
func (es MemberErrors) Error() string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// noMajority reports whether so many members answered ErrNotHeld that no
// majority can hold the lease: it is lost (Refresh) or was (Release).
func (d *Driver) noMajority(t *tally) bool { return t.notHeld > len(d.members)-d.quorum }

// failure returns the error of a call that did not reach a majority: it
// wraps what, the members' answers (MemberErrors, which wraps none of
// them), ctx's error when ctx is done, and is permanent when so many
// members failed permanently that no retry can reach a majority.
func (d *Driver) failure(ctx context.Context, op, key string, t *tally, what error) error {
	var err error
	switch {
	case len(t.errs) == 0:
		err = what
	case what == nil:
		err = t.errs
	default:
		err = fmt.Errorf("%w: %w", what, t.errs)
	}
	if cerr := ctxErr(ctx); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	if t.closed > len(d.members)-d.quorum {
		err = fmt.Errorf("%w: %w", driver.ErrClosed, err) // no majority is open
	}
	err = errs.Wrap(ctx, op, key, err)
	if t.permanent > len(d.members)-d.quorum {
		return driver.Permanent(err)
	}
	return err
}

// ctxErr returns ctx's error, or context.DeadlineExceeded once ctx's
// deadline has passed: the members' network deadlines, taken from ctx's,
// may end their calls a moment before ctx's own timer fires.
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// errs names the driver's errors: the members' errors are already
// permanent when no retry cures them.
var errs = driverkit.Errors{Driver: "quorumdriver"}

// TryAcquire implements driver.Driver: it asks every member, in parallel,
// and grants the key when a majority granted it within the lease's
// validity and took the grant's token as their floor (see the package
// doc). Otherwise it releases what it got, in parallel, and returns an
// error wrapping a *driver.LockedError when a member refused because of
// another owner.
//
// With req.Queued (on a quorum whose Capabilities report Queue) every
// member's attempt is queued too.
func (d *Driver) TryAcquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	op := "try-acquire"
	if req.Queued {
		op = "try-acquire-queued"
	}
	return d.acquire(ctx, op, req, func(ctx context.Context, i int) (driver.Lease, error) {
		return d.members[i].TryAcquire(ctx, req)
	})
}

func (d *Driver) acquire(ctx context.Context, op string, req driver.Request, f func(context.Context, int) (driver.Lease, error)) (driver.Lease, error) {
	if err := ctx.Err(); err != nil {
		return driver.Lease{}, errs.Wrap(ctx, op, req.Key, err)
	}
	timeout := d.memberTimeout(req.TTL)
	drift := Drift(req.TTL)
	start := time.Now()
	rs := fanOutMajority(ctx, timeout, d.limit(req.TTL), d.quorum, d.all, f)

	rs = d.settleSplit(ctx, req, start, timeout, rs, f)

	t, granted := tallyOf(rs)
	granted, doubted := d.sift(req.Key, req.Owner, rs, granted)
	token := d.token(rs, granted)
	var why error
	if len(granted) >= d.quorum {
		confirmed := d.writeBack(ctx, timeout, req, token, rs, granted, &t)
		begin := d.validFrom(start, rs, confirmed)
		switch {
		case len(confirmed) < d.quorum:
			why = fmt.Errorf("%w: %d of %d members granted, %d took the token", ErrTooFewMembers, len(granted), len(d.members), len(confirmed))
		case time.Since(begin) >= req.TTL-drift:
			why = ErrValidity
		default:
			l := driver.Lease{Key: req.Key, Owner: req.Owner, Mode: req.Mode, TTL: req.TTL, Token: token}
			l.Start = begin.Add(-drift)
			return l, nil
		}
	}
	// Not granted: give back what was granted, unless ctx is done (the
	// front-end then releases in the background).
	if back := append(granted, doubted...); len(back) > 0 && ctx.Err() == nil {
		d.giveBack(ctx, timeout, req, rs, back)
	}
	if why == nil && t.locked > 0 {
		return driver.Lease{}, errs.Wrap(ctx, op, req.Key, &driver.LockedError{Remaining: t.remaining})
	}
	if why == nil {
		why = fmt.Errorf("%w: %d of %d members granted%s", ErrTooFewMembers, len(granted), len(d.members), inDoubt(doubted))
	}
	return driver.Lease{}, d.failure(ctx, op, req.Key, &t, why)
}

// token returns the token of the grants in rs of the members in granted:
// of the tokens that a majority of them can hold (their own, or a lower
// one that writeBack raises to it), the one that most of them hold
// already, the highest on a tie. A new grant's members each grant a token
// of their own, so it is the highest. A re-acquire by the holder finds
// the holder's token on the members that kept its grant, while a member
// whose grant came too late to count (its answer timed out), or that a
// failed attempt gave its part back to, grants another, higher one:
// taking that one would change the token of a lease the holder has, and
// the members that hold the holder's token would no longer renew it.
// With fewer than a majority granted it is the highest.
func (d *Driver) token(rs []result[driver.Lease], granted []int) uint64 {
	var best uint64
	bestSame := 0
	for _, i := range granted {
		tok := rs[i].v.Token
		same, upTo := 0, 0
		for _, j := range granted {
			switch u := rs[j].v.Token; {
			case u == tok:
				same++
				upTo++
			case u < tok:
				upTo++
			}
		}
		if upTo < min(d.quorum, len(granted)) {
			continue
		}
		if same > bestSame || same == bestSame && tok > best {
			best, bestSame = tok, same
		}
	}
	return best
}

// writeBack writes token back to the members of granted that granted a
// lower one, as a token floor (Request.MinToken), and returns the members
// that hold the grant with token. A majority must hold it: it writes to as
// few members as that takes, then, if some failed, to the others. A
// member left with its own lower token takes the quorum's at the lease's
// first renewal (see renew). A member that granted a higher token (see
// token) does not count: it keeps that grant, which Refresh does not
// renew, until it expires or the lease is released. A member whose hold
// took the token has it in rs, so that a give-back names it (see
// giveBack); a failed write-back is added to t.
func (d *Driver) writeBack(ctx context.Context, timeout time.Duration, req driver.Request, token uint64, rs []result[driver.Lease], granted []int, t *tally) (confirmed []int) {
	var low []int
	for _, i := range granted {
		switch tok := rs[i].v.Token; {
		case tok < token:
			low = append(low, i)
		case tok == token:
			confirmed = append(confirmed, i)
		}
	}
	floor := driver.Request{Key: req.Key, Owner: req.Owner, Mode: req.Mode, TTL: req.TTL, MinToken: token}
	for len(low) > 0 && len(confirmed) < d.quorum && ctx.Err() == nil {
		batch := low[:min(d.quorum-len(confirmed), len(low))]
		low = low[len(batch):]
		wb := fanOutMajority(ctx, timeout, d.limit(req.TTL), len(batch), batch, func(ctx context.Context, i int) (struct{}, error) {
			_, err := d.members[i].TryAcquire(ctx, floor)
			return struct{}{}, err
		})
		for j, r := range wb {
			if r.err == nil {
				rs[batch[j]].v.Token = token
				confirmed = append(confirmed, batch[j])
			} else {
				t.add(batch[j], fmt.Errorf("raise token floor: %w", r.err))
			}
		}
	}
	return confirmed
}

// validFrom returns when the grant held by the members in held (at least
// a majority) began, as the validity counts it: a member's grant began
// when the attempt's first request was sent (start), or earlier when the
// member says so (Lease.Start: a handoff to a queued owner lives only as
// long as the queue entry it replaced, whatever the attempt). The
// majority whose grants began last holds the key until the earliest of
// their ends, so the grant began at the majority-th latest start.
func (d *Driver) validFrom(start time.Time, rs []result[driver.Lease], held []int) time.Time {
	if len(held) < d.quorum {
		return start
	}
	starts := make([]time.Time, len(held))
	for j, i := range held {
		starts[j] = start
		if s := rs[i].v.Start; !s.IsZero() && s.Before(start) {
			starts[j] = s
		}
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return b.Compare(a) })
	return starts[d.quorum-1]
}

// giveBack releases the grants in rs of the members in idx, each by its
// token, and puts those whose release went unanswered in limbo (see
// internal/limbo): the release may still be on its way.
func (d *Driver) giveBack(ctx context.Context, timeout time.Duration, req driver.Request, rs []result[driver.Lease], idx []int) {
	rel := fanOut(ctx, timeout, idx, func(ctx context.Context, i int) (struct{}, error) {
		l := driver.Lease{Key: req.Key, Owner: req.Owner, Mode: req.Mode, TTL: req.TTL, Token: rs[i].v.Token}
		return struct{}{}, d.members[i].Release(ctx, l)
	})
	for j, i := range idx {
		d.limbo.GaveBack(req.Key, req.Owner, i, rs[i].v.Token, rel[j].err, req.TTL)
	}
}

// inDoubt says, for an error message, how many members' answers did not
// count because a release of their grant may still be on its way.
func inDoubt(doubted []int) string {
	if len(doubted) == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d more in doubt: a release of their grant may still be on its way)", len(doubted))
}

// Refresh implements driver.Driver: it renews the lease on every member, in
// parallel, and succeeds when a majority renewed it within the lease's
// validity. It returns an error wrapping driver.ErrNotHeld when so many
// members no longer hold the lease that no majority can renew it.
func (d *Driver) Refresh(ctx context.Context, l driver.Lease) (driver.Lease, error) {
	const op = "refresh"
	if err := ctx.Err(); err != nil {
		return driver.Lease{}, errs.Wrap(ctx, op, l.Key, err)
	}
	start := time.Now()
	ml := l
	ml.Start = time.Time{}
	rs := fanOutMajority(ctx, d.memberTimeout(l.TTL), d.limit(l.TTL), d.quorum, d.all, func(ctx context.Context, i int) (driver.Lease, error) {
		return d.renew(ctx, d.members[i], ml)
	})
	t, renewed := tallyOf(rs)
	renewed, doubted := d.sift(l.Key, l.Owner, rs, renewed)
	ok := len(renewed)
	switch {
	case ok >= d.quorum && time.Since(start) < l.TTL-Drift(l.TTL):
		l.Start = time.Time{}
		return l, nil
	case ok >= d.quorum:
		return driver.Lease{}, d.failure(ctx, op, l.Key, &t, ErrValidity)
	case d.noMajority(&t):
		return driver.Lease{}, d.failure(ctx, op, l.Key, &t, fmt.Errorf("%w: %d of %d members no longer hold it", driver.ErrNotHeld, t.notHeld, len(d.members)))
	}
	return driver.Lease{}, d.failure(ctx, op, l.Key, &t, fmt.Errorf("%w: %d of %d members renewed%s", ErrTooFewMembers, ok, len(d.members), inDoubt(doubted)))
}

// renew refreshes l on member m. A member that granted l's hold with a
// token lower than the quorum's, and was not needed for the write-back's
// majority (see writeBack), answers that it does not hold l: it is then
// given l.Token as its floor, which succeeds only while l's owner holds
// the key there, and refreshed with it. Only a hold's first renewal finds
// such a member; a hold released before it costs no write-back to it. A
// member that holds the grant with a higher token (granted again after
// its first grant was lost there) keeps it and does not count.
func (d *Driver) renew(ctx context.Context, m driver.Driver, l driver.Lease) (driver.Lease, error) {
	r, err := m.Refresh(ctx, l)
	if !errors.Is(err, driver.ErrNotHeld) {
		return r, err
	}
	floor := driver.Request{Key: l.Key, Owner: l.Owner, Mode: l.Mode, TTL: l.TTL, MinToken: l.Token}
	if fl, ferr := m.TryAcquire(ctx, floor); ferr != nil || fl.Token != l.Token {
		return r, err // not held there, or held with a higher token
	}
	return m.Refresh(ctx, l)
}

// Release implements driver.Driver: it releases the lease on every member,
// in parallel. It returns an error wrapping driver.ErrNotHeld when more
// than N − majority members did not hold the lease, so that no majority
// did (it had expired or been lost there; what other members still held
// is released all the same); nil
// when a majority is known not to hold it any more and at least one of
// them released it; another error when fewer than a majority answered (the
// members that did not keep their part until its TTL runs out, or until
// the front-end's retry).
func (d *Driver) Release(ctx context.Context, l driver.Lease) error {
	const op = "release"
	if err := ctx.Err(); err != nil {
		return errs.Wrap(ctx, op, l.Key, err)
	}
	if l.Token == 0 && !l.Abandoned {
		return errs.Wrap(ctx, op, l.Key, driver.ErrNotHeld) // no grant has token 0
	}
	ml := l // each member's own token is not known: release it abandoned
	ml.Token, ml.Start, ml.Abandoned = 0, time.Time{}, true
	rs := fanOut(ctx, d.memberTimeout(l.TTL), d.all, func(ctx context.Context, i int) (struct{}, error) {
		return struct{}{}, d.members[i].Release(ctx, ml)
	})
	d.limbo.Forget(l.Key, l.Owner)
	t, released := tallyOf(rs)
	ok := len(released)
	switch {
	case d.noMajority(&t):
		// No majority held it: it had expired or been lost there,
		// whatever the others, whose grants came later, still held.
		return d.failure(ctx, op, l.Key, &t, fmt.Errorf("%w: %d of %d members no longer held it", driver.ErrNotHeld, t.notHeld, len(d.members)))
	case ok+t.notHeld >= d.quorum && ok > 0:
		return nil
	}
	return d.failure(ctx, op, l.Key, &t, fmt.Errorf("%w: %d of %d members answered", ErrTooFewMembers, ok+t.notHeld, len(d.members)))
}

// priority returns the member that settles split votes on key: the
// attempt that holds it keeps trying the members that refused it.
func (d *Driver) priority(key string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(len(d.members)))
}

// settleSplit settles a split vote. When concurrent attempts each got a
// minority, every one of them would give up; instead, the attempt that
// holds the key's priority member (at most one attempt can) asks the
// members that refused it again, with short pauses, for at most one
// member timeout, while the others give up theirs. It returns rs updated
// with the new replies.
func (d *Driver) settleSplit(ctx context.Context, req driver.Request, start time.Time, timeout time.Duration,
	rs []result[driver.Lease], f func(context.Context, int) (driver.Lease, error)) []result[driver.Lease] {
	p := d.priority(req.Key)
	if rs[p].err != nil {
		return rs
	}
	granted, locked := 0, []int(nil)
	for i, r := range rs {
		switch {
		case r.err == nil:
			granted++
		case errors.Is(r.err, driver.ErrLocked):
			locked = append(locked, i)
		}
	}
	if granted >= d.quorum || granted+len(locked) < d.quorum {
		return rs
	}
	deadline := start.Add(min(timeout, req.TTL/4))
	pause := time.Millisecond
	for granted < d.quorum && len(locked) > 0 {
		if time.Until(deadline) < pause {
			return rs
		}
		tm := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			tm.Stop()
			return rs
		case <-tm.C:
		}
		pause = min(2*pause, 8*time.Millisecond)
		again := fanOut(ctx, timeout, locked, f)
		still := locked[:0:0]
		for j, r := range again {
			i := locked[j]
			rs[i] = r
			switch {
			case r.err == nil:
				granted++
			case errors.Is(r.err, driver.ErrLocked):
				still = append(still, i)
			}
		}
		locked = still
	}
	return rs
}
