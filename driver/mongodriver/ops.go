package mongodriver

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/go-locker/locker/driver"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// maxAttempts bounds the changes a TryAcquire tries when other writers
// keep inserting the version it meant to insert; it then reports the key
// as locked. Refresh and Release try until their context ends.
const maxAttempts = 8

// errContended is returned by apply after maxAttempts lost races.
var errContended = errors.New("key contended: another writer took each version tried")

// A change computes, from the key's current version and the server's
// clock, the version to insert (nil: nothing to write) and the test that
// the key's current version must pass after the insert for the change to
// be in force; or an error, returned as it is.
type change func(cur *version, now span) (next *version, inForce func(top *version) bool, err error)

// apply reads key's current version, inserts the version f computes from
// it, and checks that the insert is in force, until one is or f refuses.
// The insert of version v+1 fails with a duplicate key error when another
// writer inserted it first: the read is stale, and apply reads again. The
// first attempt starts from the cached version when there is one.
func (d *Driver) apply(ctx context.Context, key string, attempts int, f change) error {
	cur := d.cache.get(key)
	for attempt := 1; ; attempt++ {
		cached := cur != nil
		if !cached {
			var err error
			if cur, err = d.top(ctx, key); err != nil {
				return err
			}
		}
		done, err := d.try(ctx, cur, cached, f)
		if done || err != nil {
			return err
		}
		cur = nil
		if cached {
			attempt-- // a stale cache is not a lost race
			continue
		}
		if attempt == attempts {
			return errContended
		}
		if err := pause(ctx, attempt); err != nil {
			return err
		}
	}
}

// try makes the change f computes from cur, a version of the key read
// earlier (or cached): it reports whether the change is made, or refused
// (f's error) on a version just read. An insert that succeeded is not a
// change made unless the key's current version, read after it, shows the
// change in force; that version is cached.
func (d *Driver) try(ctx context.Context, cur *version, cached bool, f change) (done bool, err error) {
	now, err := d.clock.now(ctx)
	if err != nil {
		return false, err
	}
	next, inForce, err := f(cur, now)
	switch {
	case cached && (err != nil || next == nil):
		return false, nil // decide on a version just read
	case err != nil || next == nil:
		return true, err
	}
	_, err = d.coll.InsertOne(ctx, next)
	switch {
	case mongo.IsDuplicateKeyError(err):
		d.cache.drop(cur.Key)
		return false, nil
	case err != nil:
		d.cache.drop(cur.Key)
		return false, err
	}
	top, err := d.settle(ctx, cur.Key, next.V)
	if err != nil || !inForce(top) {
		d.cache.drop(cur.Key)
		return false, err
	}
	d.cache.put(cur.Key, top)
	return true, nil
}

// top reads key's current version: the one with the highest number, or
// an empty version 0 when the key has none.
func (d *Driver) top(ctx context.Context, key string) (*version, error) {
	var v version
	err := d.coll.FindOne(ctx, bson.D{{Key: "k", Value: key}},
		options.FindOne().SetSort(bson.D{{Key: "v", Value: -1}})).Decode(&v)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return &version{Key: key}, nil
	}
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// settle follows the insert of version v of key: it reads the key's
// current version, to check that the insert is in force, and has the
// versions below v deleted in the background (see collect).
func (d *Driver) settle(ctx context.Context, key string, v int64) (*version, error) {
	top, err := d.top(ctx, key)
	if err == nil {
		d.collect(key, v)
	}
	return top, err
}

// pause sleeps before attempt+1: a random time up to 2^attempt ms (at
// most 64ms), so that racing writers spread out.
func pause(ctx context.Context, attempt int) error {
	t := time.NewTimer(time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt, 6))))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TryAcquire implements driver.Driver: one change that adds req's hold
// to the key's version, or returns the refusal computed from it.
func (d *Driver) TryAcquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	var got hold
	err := d.do(ctx, "acquire", req.Key, req.TTL, func(ctx context.Context) error {
		err := d.apply(ctx, req.Key, maxAttempts, func(cur *version, now span) (*version, func(*version) bool, error) {
			next, h, err := grant(cur, req, now)
			got = h
			return next, func(top *version) bool { return has(top, h) }, err
		})
		if errors.Is(err, errContended) {
			return &driver.LockedError{}
		}
		return err
	})
	if err != nil {
		return driver.Lease{}, err
	}
	return driver.Lease{Key: req.Key, Owner: req.Owner, Mode: req.Mode, Token: uint64(got.Token), TTL: req.TTL}, nil
}

// Refresh implements driver.Driver: one change that extends l's hold in
// the key's version.
func (d *Driver) Refresh(ctx context.Context, l driver.Lease) (driver.Lease, error) {
	var got hold
	err := d.do(ctx, "refresh", l.Key, l.TTL, func(ctx context.Context) error {
		return d.apply(ctx, l.Key, 0, func(cur *version, now span) (*version, func(*version) bool, error) {
			next, h, err := renew(cur, l, now)
			got = h
			return next, func(top *version) bool { return has(top, h) }, err
		})
	})
	if err != nil {
		return driver.Lease{}, err
	}
	l.Token = uint64(got.Token)
	return l, nil
}

// Release implements driver.Driver: one change that removes l's hold
// from the key's version.
func (d *Driver) Release(ctx context.Context, l driver.Lease) error {
	return d.do(ctx, "release", l.Key, l.TTL, func(ctx context.Context) error {
		return d.apply(ctx, l.Key, 0, func(cur *version, now span) (*version, func(*version) bool, error) {
			next, h, err := drop(cur, l, now)
			return next, func(top *version) bool { return lacks(top, []hold{h}) }, err
		})
	})
}
