package redisdriver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
	"github.com/redis/go-redis/v9"
)

// TryAcquire implements driver.Driver in one round trip, queued
// (Request.Queued) or not.
//
// With Request.MinToken (a token floor) it grants nothing: every later
// token of req.Key exceeds the floor, and req.Owner's hold of req.Key in
// req.Mode, if any, takes the floor as its token when its own is lower.
// The fence key keeps the floor, as it keeps a token granted by this
// server (see Tokens in the package doc), while the server's clock has not
// passed it; once it has, the clock alone exceeds it. So the floor needs
// no state after that moment, and tokens exceed it as long as the server's
// clock does not step back. A floor from another server's clock, ahead of
// this one, is kept until this server's clock catches up with it. A
// restart that loses the data set loses a floor the clock has not yet
// passed. The hold's release keeps its token, and so the floor.
func (d *Driver) TryAcquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	if req.MinToken != 0 {
		return d.raiseTokenFloor(ctx, req)
	}
	return d.acquire(ctx, req, req.Queued)
}

func (d *Driver) acquire(ctx context.Context, req driver.Request, queued bool) (driver.Lease, error) {
	const op = "acquire"
	if err := ctx.Err(); err != nil {
		return driver.Lease{}, opError(op, req.Key, err)
	}
	mode, ms := modeArg(req.Mode), req.TTL.Milliseconds()
	data, err := dataArg(req)
	if err != nil {
		return driver.Lease{}, opError(op, req.Key, err)
	}
	var sent time.Time
	var note string
	if queued {
		mode = queuedArg(req.Mode)
		// With Replicas, a handoff is acknowledged by the owner's own
		// round trip, which finds the hold and extends it.
		if l, ok := d.takeGrant(req, ms); ok && d.replicas == 0 {
			return l, nil
		}
		// Before the request: the handoff's message may arrive on the
		// pub/sub connection before the reply does. If the request
		// fails, the front-end's Release forgets the owner.
		sent, note = d.queueing(req.Owner, req.Key)
	}
	args := d.acquireArgs(req, mode, ms, data, note)
	var res any
	var ackErr error
	if d.replicas > 0 {
		res, ackErr, err = d.runAck(ctx, acquireScript, args)
	} else {
		res, err = d.run(ctx, acquireScript, args)
	}
	if err != nil {
		return driver.Lease{}, opError(op, req.Key, err)
	}
	tok, remaining, floor, err := acquireReply(res, queued)
	if err != nil {
		var lerr *driver.LimitError
		if errors.As(err, &lerr) && queued {
			d.queued1(req.Owner, false, sent, 0)
		}
		return driver.Lease{}, opError(op, req.Key, err)
	}
	if queued {
		d.queued1(req.Owner, tok == 0, sent, floor)
	}
	if tok == 0 {
		return driver.Lease{}, opError(op, req.Key,
			&driver.LockedError{Remaining: time.Duration(remaining) * time.Millisecond})
	}
	l := driver.Lease{
		Key:   req.Key,
		Owner: req.Owner,
		Mode:  req.Mode,
		Token: tok,
		TTL:   time.Duration(ms) * time.Millisecond,
	}
	if err := d.unreported(ctx, op, l, ackErr); err != nil {
		return driver.Lease{}, err
	}
	return l, nil
}

// acquireArgs returns the arguments of the acquire script for req, in
// mode (see checkArgs and queuedArg) for ms milliseconds, with req's value
// data and, when the owner is queued, the driver's channel note.
func (d *Driver) acquireArgs(req driver.Request, mode any, ms int64, data, note string) []any {
	switch {
	case note != "":
		// The handoff to the owner is published on d's own channel.
		if data != "" {
			mode = dataMode(mode)
		}
		return acquireScript.args(d.base(req.Key), req.Owner, mode, ms, data, note)
	case data == "":
		a := acquireScript.ownerArgs(d.base(req.Key), req.Owner, mode)
		a.ms = ms
		a.args[len(a.args)-1] = &a.ms
		return a.args[:]
	default:
		return acquireScript.args(d.base(req.Key), req.Owner, dataMode(mode), ms, data)
	}
}

// acquireReply reads the acquire script's reply res: the token granted (0
// when refused) and the refusal's remaining milliseconds, the bound of the
// tokens granted so far of a queued refusal, or a *driver.LimitError for a
// shared request whose limit differs from the key's.
func acquireReply(res any, queued bool) (tok uint64, remaining int64, floor uint64, err error) {
	if a, ok := res.([]any); ok && queued && len(a) == 2 {
		// A queued request refused, with the bound of the tokens
		// granted so far.
		if n, ok := a[1].(int64); ok && n > 0 {
			res, floor = a[0], uint64(n)
		}
	}
	if a, ok := res.([]any); ok {
		// A shared request whose limit differs from the key's.
		if n, ok := a[0].(int64); len(a) == 1 && ok && n >= 0 {
			return 0, 0, 0, &driver.LimitError{Limit: n}
		}
	}
	tok, remaining, err = tokenReply(res)
	return tok, remaining, floor, err
}

// unreported gives the grant l back and returns why when the driver
// cannot report it: too few replicas acknowledged it (ackErr; a failover
// could lose it), or an earlier give-back of this very grant went
// unanswered and may still delete it. If the release fails, the grant
// expires with its TTL, unless the front-end's retry re-grants it.
func (d *Driver) unreported(ctx context.Context, op string, l driver.Lease, ackErr error) error {
	switch {
	case ackErr != nil:
	case d.replicas > 0 && d.limbo.Doubtful(l.Key, l.Owner, 0, l.Token):
		ackErr = errInDoubt
	default:
		return nil
	}
	d.giveBack(ctx, l)
	return opError(op, l.Key, ackErr)
}

// errInDoubt is why a grant is not reported when an unanswered give-back
// of it may still reach the server (see giveBack).
var errInDoubt = errors.New("grant in doubt: an unanswered release of it may still reach the server")

// giveBack releases the grant l, which the driver does not report, by its
// token. When the release goes unanswered it may still reach the server
// later, after the front-end asked again with the same owner, and delete
// the grant that attempt reported: until the server is known to have
// dropped l (a release of it answered, or a grant with another token), a
// grant of the owner with l's token is not reported (internal/limbo).
func (d *Driver) giveBack(ctx context.Context, l driver.Lease) {
	err := d.Release(ctx, l)
	d.limbo.GaveBack(l.Key, l.Owner, 0, l.Token, err, l.TTL)
}

// Refresh implements driver.Driver in one round trip. When l.Token is not
// 0 it must be the token of the hold, or Refresh reports ErrNotHeld.
func (d *Driver) Refresh(ctx context.Context, l driver.Lease) (driver.Lease, error) {
	const op = "refresh"
	if err := ctx.Err(); err != nil {
		return driver.Lease{}, opError(op, l.Key, err)
	}
	args, ms := d.refreshArgs(l)
	if d.replicas == 0 {
		res, err := d.run(ctx, refreshScript, args)
		return refreshResult(l, ms, res, err)
	}
	res, ackErr, err := d.runAck(ctx, refreshScript, args)
	if l, err = refreshResult(l, ms, res, err); err == nil && ackErr != nil {
		return driver.Lease{}, opError(op, l.Key, ackErr)
	}
	return l, err
}

// refreshArgs returns the arguments of the EVALSHA of refreshScript that
// refreshes l, and l's TTL in milliseconds.
func (d *Driver) refreshArgs(l driver.Lease) (args []any, ms int64) {
	ms = l.TTL.Milliseconds()
	return refreshScript.args(d.base(l.Key), l.Owner, modeArg(l.Mode), ms, l.Token), ms
}

// refreshResult returns the outcome of the refresh script for l, given its
// reply res, err.
func refreshResult(l driver.Lease, ms int64, res any, err error) (driver.Lease, error) {
	const op = "refresh"
	if err != nil {
		return driver.Lease{}, opError(op, l.Key, err)
	}
	tok, remaining, err := tokenReply(res)
	if err == nil && tok == 0 && remaining != 0 {
		err = errBadReply(res)
	}
	if err != nil {
		return driver.Lease{}, opError(op, l.Key, err)
	}
	if tok == 0 {
		return driver.Lease{}, opError(op, l.Key, driver.ErrNotHeld)
	}
	l.Token = tok
	l.TTL = time.Duration(ms) * time.Millisecond
	return l, nil
}

// noToken is a token no grant has (tokens stay below 2^53), for the
// release of a lease with Token 0 that is not Abandoned: it releases no
// hold, and still removes the owner's queue entry.
const noToken = 1<<64 - 1

// Release implements driver.Driver in one round trip. l.Token must be the
// token of the hold, or Release reports ErrNotHeld and releases nothing;
// with l.Abandoned it releases l.Owner's hold whatever its token. Either
// way it removes l.Owner's wait-queue entry.
func (d *Driver) Release(ctx context.Context, l driver.Lease) error {
	const op = "release"
	if err := ctx.Err(); err != nil {
		return opError(op, l.Key, err)
	}
	mode := modeArg(l.Mode)
	if d.replicas > 0 {
		d.limbo.Forget(l.Key, l.Owner) // see giveBack
	}
	a := releaseScript.ownerArgs(d.base(l.Key), l.Owner, mode)
	switch {
	case l.Abandoned:
		a.tok = 0 // any token, in release.lua
	case l.Token == 0:
		a.tok = noToken // no grant has it: the script only leaves the queue
	default:
		a.tok = l.Token
	}
	a.args[len(a.args)-1] = &a.tok
	res, err := d.run(ctx, releaseScript, a.args[:])
	d.queued1(l.Owner, false, time.Time{}, 0)
	if err != nil {
		return opError(op, l.Key, err)
	}
	switch n, ok := res.(int64); {
	case ok && n == 1:
		return nil
	case ok && n == 0:
		return opError(op, l.Key, driver.ErrNotHeld)
	}
	return opError(op, l.Key, errBadReply(res))
}

// queueing records that a queued request for owner, waiting for key, is
// about to be sent, and returns the time it is sent and the channel the
// request names for its handoff: d's own (see Driver.note) when the hub
// has confirmed it, so that the handoff reaches d, else "" (the handoff
// is then published on the key's channel).
func (d *Driver) queueing(owner, key string) (time.Time, string) {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	q := d.queued[owner]
	if q == nil {
		q = &queuedOwner{key: key}
		d.queued[owner] = q
	}
	if q.pending.IsZero() {
		q.pending = now
	}
	if h := d.hub; h != nil && h.noteOK && h.closed == nil {
		return now, d.note
	}
	return now, ""
}

// queued1 records the outcome of a request for owner: still queued (its
// entry renewed by the request sent at sent, which reported floor as the
// bound of the key's tokens so far), or granted or released.
func (d *Driver) queued1(owner string, queued bool, sent time.Time, floor uint64) {
	d.mu.Lock()
	if q := d.queued[owner]; q != nil {
		if queued {
			q.confirmed, q.pending = sent, time.Time{}
			// A handoff announced with a token up to floor was to
			// an earlier entry of the same owner: stale.
			q.floor = max(q.floor, floor)
			if q.granted <= q.floor {
				q.granted = 0
			}
		} else {
			delete(d.queued, owner)
		}
	}
	d.mu.Unlock()
}

// takeGrant returns the lease of a handoff to req.Owner announced on the
// key's channel, if any, without a round trip: the lease lives at least as
// long as the queue entry it replaced, so it starts no later than that
// entry's last renewal.
func (d *Driver) takeGrant(req driver.Request, ms int64) (driver.Lease, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	q := d.queued[req.Owner]
	if q == nil || q.granted == 0 || q.floor == 0 {
		// No handoff, or none that a refusal of this entry dates.
		return driver.Lease{}, false
	}
	delete(d.queued, req.Owner)
	return driver.Lease{
		Key:   req.Key,
		Owner: req.Owner,
		Mode:  req.Mode,
		Token: q.granted,
		TTL:   time.Duration(ms) * time.Millisecond,
		Start: q.start(),
	}, true
}

// modeArg encodes m for the scripts. The values are constants, which
// need no allocation to box.
func modeArg(m driver.Mode) any {
	if m == driver.Shared {
		return "s"
	}
	return "x"
}

// queuedArg encodes m, which modeArg accepts, for the acquire script of
// a queued TryAcquire.
func queuedArg(m driver.Mode) any {
	if m == driver.Shared {
		return "sq"
	}
	return "xq"
}

// maxLimit is the largest Request.Limit the scripts count exactly: Lua's
// numbers are doubles.
const maxLimit = 1 << 53

// dataArg checks the counted and value fields of req and returns the data
// the scripts keep with the grant (see common.lua): "" for an uncounted
// request without a value, else ":<weight>:<limit>:<value>".
func dataArg(req driver.Request) (string, error) {
	switch {
	case req.Limit > maxLimit:
		return "", driver.Permanent(fmt.Errorf("limit %d over %d, the largest Lua counts exactly", req.Limit, int64(maxLimit)))
	case req.Limit == 0 && req.Value == "":
		return "", nil
	}
	return ":" + strconv.FormatInt(req.Weight, 10) + ":" + strconv.FormatInt(req.Limit, 10) + ":" + req.Value, nil
}

// dataMode turns mode, from modeArg or queuedArg, into that of a request
// with data, which the acquire script's fast path leaves to the full
// script.
func dataMode(mode any) any {
	switch mode {
	case "x":
		return "xd"
	case "s":
		return "sd"
	case "xq":
		return "xqd"
	}
	return "sqd"
}

// tokenReply decodes the integer reply of the acquire and refresh scripts:
// a token (> 0), or -1 - remaining (< 0) when not granted, remaining the
// milliseconds the conflicting holds and queue entries last (0: unknown).
func tokenReply(res any) (tok uint64, remaining int64, err error) {
	n, ok := res.(int64)
	switch {
	case !ok || n == 0:
		return 0, 0, errBadReply(res)
	case n > 0:
		return uint64(n), 0, nil
	}
	return 0, -1 - n, nil
}

func errBadReply(res any) error {
	return driver.Permanent(fmt.Errorf("unexpected script reply %v", res))
}

// errs names the driver's errors: a Redis error reply that no retry
// cures is permanent, and so is the error of a closed client, which wraps
// driver.ErrClosed.
var errs = driverkit.Errors{
	Driver:    "redisdriver",
	Permanent: isPermanent,
	Closed: func(err error) error {
		if errors.Is(err, redis.ErrClosed) {
			return redis.ErrClosed
		}
		return nil
	},
}

// opError names err, the error of op on key, by errs.
func opError(op, key string, err error) error { return errs.Wrap(nil, op, key, err) }

// permanentPrefixes start the Redis error replies that a retry of the same
// request cannot cure: the data has the wrong type, the server lacks a
// command or refuses it, or the script itself failed.
var permanentPrefixes = []string{
	"WRONGTYPE",
	"NOSCRIPT",
	"NOPERM",
	"NOAUTH",
	"WRONGPASS",
	"CROSSSLOT",
	"ERR unknown command",
	"ERR unknown subcommand",
	"ERR wrong number of arguments",
	"ERR syntax error",
	"ERR value is not an integer",
	"ERR increment or decrement would overflow",
	"ERR Error running script",
	"ERR Error compiling script",
	"ERR user_script",
	"ERR This Redis command is not allowed from script",
	"ERR Unknown Redis command",
}

// isPermanent reports whether err is a Redis error reply that no retry can
// cure.
func isPermanent(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	for _, p := range permanentPrefixes {
		if len(msg) >= len(p) && msg[:len(p)] == p {
			return true
		}
	}
	return false
}
