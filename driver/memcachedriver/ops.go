package memcachedriver

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/go-locker/locker/driver"
)

// maxRounds bounds the rounds of one call whose compare-and-swap keeps
// failing because the hold item changed under it (which takes other calls
// of the same owner, or a hold that expires and is taken again, each
// round): the call then fails with an error the front-end may retry.
const maxRounds = 8

// errBusy is the error of a call that ran out of rounds.
var errBusy = fmt.Errorf("the hold item changed under %d compare-and-swaps in a row", maxRounds)

// errNoCAS is the error when memcached returns CAS id 0: it runs with CAS
// disabled (-C), and no compare-and-swap would guard anything.
var errNoCAS = driver.Permanent(errors.New("memcached returned CAS id 0: it runs with CAS disabled (-C), which the driver needs"))

// TryAcquire implements driver.Driver. An uncontended grant takes four
// round trips (add, incr, gets, cas), a refused attempt two (add, gets),
// and an idempotent re-acquire three (add, gets, cas).
func (d *Driver) TryAcquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	const op = "acquire"
	ttl := seconds(req.TTL)
	tok, err := call(ctx, d, func(ctx context.Context) (uint64, error) {
		return d.acquire(ctx, req.Key, req.Owner, ttl)
	}, func(tok uint64, err error) {
		if err == nil {
			// The caller gave up before the grant: give it back.
			l := driver.Lease{Key: req.Key, Owner: req.Owner, Mode: req.Mode, Token: tok}
			_ = d.releaseOnce(context.Background(), l)
		}
	})
	if err != nil {
		return driver.Lease{}, d.errs.Wrap(ctx, op, req.Key, err)
	}
	return driver.Lease{Key: req.Key, Owner: req.Owner, Mode: req.Mode, Token: tok, TTL: req.TTL}, nil
}

// seconds returns ttl in seconds: the front-end passes only TTLs that
// are whole numbers of the driver's TTLUnit, a second.
func seconds(ttl time.Duration) int64 { return int64(ttl / time.Second) }

// acquire grants key to owner for ttl seconds and returns the token.
//
// The key is claimed with add, which succeeds for one client only, with a
// pending record (token 0) that names this round with a fresh nonce. Then
// the token is taken from the fence counter (incr), and the record is
// read again (gets) and, if it is still this round's pending record,
// turned into the grant by a compare-and-swap that writes the token. The
// token is thus taken while the key is claimed: every earlier grant of
// the key took its token before its hold ended, so before the add, and
// every later one takes its token after the compare-and-swap. See
// docs/memcachedriver.md.
func (d *Driver) acquire(ctx context.Context, key, owner string, ttl int64) (uint64, error) {
	hk, fk := itemKeys(d.prefix, key)
	for range maxRounds {
		nonce := rand.Uint64()
		tok, again, err := d.claim(ctx, hk, owner, nonce, ttl)
		if again {
			continue
		}
		if err != nil || tok != 0 {
			return tok, err
		}
		tok, again, err = d.seal(ctx, hk, fk, owner, nonce, ttl)
		if err != nil && d.live(ctx) != nil {
			// Stopped by the end of ctx or Close (the caller has
			// returned): take back this round's claim rather than
			// leave the key blocked until it expires.
			d.dropClaim(hk, owner, nonce)
		}
		if !again {
			return tok, err
		}
	}
	return 0, errBusy
}

// dropClaim deletes hk if it still holds the pending record of owner's
// round nonce. It is best effort: a claim it misses expires within
// pendingExptime.
func (d *Driver) dropClaim(hk, owner string, nonce uint64) {
	it, r, err := d.gets(hk)
	if err != nil || r.owner != owner || r.nonce != nonce || r.token != 0 {
		return
	}
	_ = d.del(it)
}

// claim is the first step of a round of acquire: it claims hk for owner
// with a pending record of nonce (an add), or takes over a claim of
// another attempt of owner's. It returns a token when owner holds the key
// already (its lease is then extended), and again when the round must
// start over; a zero token and no error mean that this round claimed the
// key.
func (d *Driver) claim(ctx context.Context, hk, owner string, nonce uint64, ttl int64) (tok uint64, again bool, err error) {
	if err := d.live(ctx); err != nil {
		return 0, false, err
	}
	err = d.client.Add(&memcache.Item{Key: hk, Value: newRecord(0, nonce, ttl, owner).encode(), Expiration: pendingExptime})
	switch {
	case err == nil:
		return 0, false, nil
	case errors.Is(err, memcache.ErrNotStored):
		return d.claimTaken(ctx, hk, owner, nonce, ttl)
	case isServerError(err):
		// memcached allocates the new item before it looks for the
		// key, so a full memcached (-M) refuses an add with an error
		// even when the key is held: say by whom, if it is.
		if err := d.live(ctx); err != nil {
			return 0, false, err
		}
		if _, r, gerr := d.gets(hk); gerr == nil && r.owner != owner {
			return 0, false, &driver.LockedError{Remaining: r.remaining()}
		}
	}
	return 0, false, err
}

// claimTaken is claim after its add was refused: the key is held, or
// claimed; by whom?
func (d *Driver) claimTaken(ctx context.Context, hk, owner string, nonce uint64, ttl int64) (tok uint64, again bool, err error) {
	if err := d.live(ctx); err != nil {
		return 0, false, err
	}
	it, r, err := d.gets(hk)
	switch {
	case errors.Is(err, memcache.ErrCacheMiss):
		return 0, true, nil // gone since the add: try again
	case err != nil:
		return 0, false, err
	case r.owner != owner:
		return 0, false, &driver.LockedError{Remaining: r.remaining()}
	}
	if err := d.live(ctx); err != nil {
		return 0, false, err
	}
	if r.token != 0 {
		// owner holds it: extend the lease, keep the token.
		err := d.cas(it, newRecord(r.token, r.nonce, ttl, owner), ttl+expirySlack)
		if err == nil {
			return r.token, false, nil
		}
		return 0, errors.Is(err, errChanged) || errors.Is(err, errGone), err
	}
	// Pending, claimed by another attempt of owner's (a call that its
	// caller gave up on, or a retry): take the claim over for this round.
	err = d.cas(it, newRecord(0, nonce, ttl, owner), pendingExptime)
	if errors.Is(err, errChanged) || errors.Is(err, errGone) {
		return 0, true, nil
	}
	return 0, false, err
}

// seal is the second step of a round of acquire, once the round claimed
// hk: it takes a token from the fence counter fk and writes it into the
// claim, unless the claim is no longer this round's (again).
func (d *Driver) seal(ctx context.Context, hk, fk, owner string, nonce uint64, ttl int64) (tok uint64, again bool, err error) {
	if err := d.live(ctx); err != nil {
		return 0, false, err
	}
	tok, err = d.nextToken(fk)
	if err != nil {
		return 0, false, err
	}
	if err := d.live(ctx); err != nil {
		return 0, false, err
	}
	it, r, err := d.gets(hk)
	switch {
	case errors.Is(err, memcache.ErrCacheMiss):
		return 0, true, nil // the claim expired: try again
	case err != nil:
		return 0, false, err
	case r.owner != owner || r.nonce != nonce || r.token != 0:
		// Not this round's claim any more: another attempt of owner's
		// took it over, or it expired and someone else claimed the key.
		// Look again.
		return 0, true, nil
	}
	if err := d.live(ctx); err != nil {
		return 0, false, err
	}
	switch err := d.cas(it, newRecord(tok, nonce, ttl, owner), ttl+expirySlack); {
	case err == nil:
		return tok, false, nil
	case errors.Is(err, errChanged), errors.Is(err, errGone):
		return 0, true, nil
	default:
		return 0, false, err
	}
}

// nextToken increments the fence counter fk and returns its new value.
// When the counter does not exist (first use of the key, or memcached lost
// it in a restart, a flush or an eviction) it creates it with the current
// Unix time in microseconds, which is then the token: tokens taken from
// the clock keep increasing across the loss of the counter as long as the
// clocks of the clients do not lag behind each other's by more than the
// time between the loss and the last grant before it (see the package
// documentation).
func (d *Driver) nextToken(fk string) (uint64, error) {
	tok, err := d.client.Increment(fk, 1)
	if err == nil {
		return tok, nil
	}
	if !errors.Is(err, memcache.ErrCacheMiss) {
		return 0, fmt.Errorf("incr of the fence counter: %w", err)
	}
	base := uint64(time.Now().UnixMicro())
	err = d.client.Add(&memcache.Item{Key: fk, Value: strconv.AppendUint(nil, base, 10)})
	switch {
	case err == nil:
		return base, nil
	case !errors.Is(err, memcache.ErrNotStored):
		return 0, fmt.Errorf("add of the fence counter: %w", err)
	}
	// Another client created it meanwhile.
	tok, err = d.client.Increment(fk, 1)
	if err != nil {
		return 0, fmt.Errorf("incr of the fence counter: %w", err)
	}
	return tok, nil
}

// Refresh implements driver.Driver in two round trips (gets, cas). It
// never re-creates a hold: the compare-and-swap fails on an item that has
// expired or been deleted.
func (d *Driver) Refresh(ctx context.Context, l driver.Lease) (driver.Lease, error) {
	const op = "refresh"
	ttl := seconds(l.TTL)
	hk, _ := itemKeys(d.prefix, l.Key)
	_, err := call(ctx, d, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, d.rewrite(ctx, hk, func(r record) bool { return r.held(l) }, func(it *memcache.Item, r record) error {
			return d.cas(it, newRecord(r.token, r.nonce, ttl, l.Owner), ttl+expirySlack)
		})
	}, nil)
	if err != nil {
		return driver.Lease{}, d.errs.Wrap(ctx, op, l.Key, err)
	}
	l.Start = time.Time{}
	return l, nil
}

// Release implements driver.Driver in two round trips (gets, cas). With
// l.Abandoned it releases l.Owner's hold whatever its token, pending or
// granted. The hold item is replaced, by a compare-and-swap, with one that
// has already expired (expiration time -1), which deletes it: memcached's
// delete takes no CAS id. A Release that fails is not tried again by the
// driver: the front-end does that.
func (d *Driver) Release(ctx context.Context, l driver.Lease) error {
	const op = "release"
	_, err := call(ctx, d, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, d.releaseOnce(ctx, l)
	}, nil)
	return d.errs.Wrap(ctx, op, l.Key, err)
}

// releaseOnce is one release of l; it stops when ctx ends or the driver
// is closed. The compare-and-swap stores an item that has already
// expired.
func (d *Driver) releaseOnce(ctx context.Context, l driver.Lease) error {
	hk, _ := itemKeys(d.prefix, l.Key)
	mine := func(r record) bool { return r.owner == l.Owner && (l.Abandoned || r.token == l.Token) }
	return d.rewrite(ctx, hk, mine, func(it *memcache.Item, _ record) error { return d.del(it) })
}

// del deletes the item read as it unless it changed since: memcached's
// delete takes no CAS id, so a compare-and-swap stores an item that has
// already expired.
func (d *Driver) del(it *memcache.Item) error {
	return casResult(d.client.CompareAndSwap(&memcache.Item{Key: it.Key, Value: nil, Expiration: -1, CasID: it.CasID}))
}

// rewrite reads the hold item hk and, if mine accepts its record, replaces
// it with write, a compare-and-swap of the item read; when another write
// came between the two it starts again, up to maxRounds times. A missing
// item, one that mine refuses and one that vanishes before the
// compare-and-swap are ErrNotHeld. It stops when ctx ends or the driver is
// closed.
func (d *Driver) rewrite(ctx context.Context, hk string, mine func(record) bool, write func(*memcache.Item, record) error) error {
	for range maxRounds {
		if err := d.live(ctx); err != nil {
			return err
		}
		it, r, err := d.gets(hk)
		if err != nil {
			return notHeldIfMissing(err)
		}
		if !mine(r) {
			return driver.ErrNotHeld
		}
		if err := d.live(ctx); err != nil {
			return err
		}
		if err := write(it, r); !errors.Is(err, errChanged) {
			return notHeldIfMissing(err)
		}
	}
	return errBusy
}

// held reports whether r is the granted hold of l.
func (r record) held(l driver.Lease) bool {
	return r.owner == l.Owner && r.token != 0 && r.token == l.Token
}

// gets reads the hold item hk with its CAS id and decodes it.
func (d *Driver) gets(hk string) (*memcache.Item, record, error) {
	it, err := d.client.Get(hk) // gomemcache's Get sends gets
	if err != nil {
		return nil, record{}, err
	}
	if it.CasID == 0 {
		return nil, record{}, errNoCAS
	}
	r, err := parseRecord(it.Value)
	if err != nil {
		return nil, record{}, driver.Permanent(err)
	}
	return it, r, nil
}

// isServerError reports whether err is a SERVER_ERROR reply, such as
// memcached's out of memory.
func isServerError(err error) bool {
	return strings.Contains(err.Error(), `"SERVER_ERROR`)
}

// errChanged and errGone are what cas returns when the item changed, or
// vanished (expired or deleted), since it was read.
var (
	errChanged = errors.New("hold item changed")
	errGone    = errors.New("hold item gone")
)

// cas replaces it, read by gets, with r, expiring exptime seconds from
// now, unless it changed or vanished since.
func (d *Driver) cas(it *memcache.Item, r record, exptime int64) error {
	return casResult(d.client.CompareAndSwap(&memcache.Item{Key: it.Key, Value: r.encode(), Expiration: int32(exptime), CasID: it.CasID}))
}

// casResult maps gomemcache's errors of a compare-and-swap to errChanged
// and errGone.
func casResult(err error) error {
	switch {
	case errors.Is(err, memcache.ErrCASConflict):
		return errChanged
	case errors.Is(err, memcache.ErrCacheMiss), errors.Is(err, memcache.ErrNotStored):
		return errGone
	}
	return err
}

// notHeldIfMissing turns the errors for an item that does not exist into
// driver.ErrNotHeld.
func notHeldIfMissing(err error) error {
	if errors.Is(err, memcache.ErrCacheMiss) || errors.Is(err, errGone) {
		return driver.ErrNotHeld
	}
	return err
}
