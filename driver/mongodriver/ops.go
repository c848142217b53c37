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

// maxAttempts bounds the changes a call tries when other writers keep
// inserting the version it meant to insert.
const maxAttempts = 8

// errContended is returned by a Refresh or Release that lost maxAttempts
// races for the next version; the front-end retries it.
var errContended = errors.New("key contended: another writer took each version tried")

// A change computes, from the key's current version and the server's
// clock, the version to insert (nil: nothing to write) and the test that
// the key's current version must pass after the insert for the change to
// be in force; or an error, returned as it is.
type change func(cur *version, now span) (next *version, inForce func(top *version) bool, err error)

// apply reads key's current version, inserts the version f computes from
// it, and checks that the insert is in force, until one is or f refuses.
// The insert of version v+1 fails with a duplicate key error when another
// writer inserted it first: the read is stale, and apply reads again.
func (d *Driver) apply(ctx context.Context, key string, f change) error {
	for attempt := 1; ; attempt++ {
		cur, err := d.top(ctx, key)
		if err != nil {
			return err
		}
		now, err := d.clock.now(ctx)
		if err != nil {
			return err
		}
		next, inForce, err := f(cur, now)
		if err != nil || next == nil {
			return err
		}
		_, err = d.coll.InsertOne(ctx, next)
		switch {
		case mongo.IsDuplicateKeyError(err):
		case err != nil:
			return err
		default:
			top, err := d.settle(ctx, key, next.V)
			if err != nil || inForce(top) {
				return err
			}
		}
		if attempt == maxAttempts {
			return errContended
		}
		if err := pause(ctx, attempt); err != nil {
			return err
		}
	}
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
// current version, to check that the insert is in force, and deletes
// the versions below v, concurrently. A version below one that exists is
// never read as current again, so deleting it cannot change a decision;
// an insert that reuses a deleted number (by a writer whose read is older
// than that version's deletion) is below the current version too, and
// its writer's check fails. The delete's error is dropped: the next
// change of the key deletes what it left.
func (d *Driver) settle(ctx context.Context, key string, v int64) (*version, error) {
	gc := make(chan struct{})
	go func() {
		defer close(gc)
		_, _ = d.coll.DeleteMany(ctx, bson.D{{Key: "k", Value: key}, {Key: "v", Value: bson.D{{Key: "$lt", Value: v}}}})
	}()
	top, err := d.top(ctx, key)
	<-gc
	return top, err
}

// pause sleeps before attempt+1: a random time up to 2^attempt ms, so
// that racing writers spread out.
func pause(ctx context.Context, attempt int) error {
	t := time.NewTimer(time.Duration(rand.Int64N(int64(time.Millisecond) << attempt)))
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
	err := d.do(ctx, "acquire", req.Key, func(ctx context.Context) error {
		err := d.apply(ctx, req.Key, func(cur *version, now span) (*version, func(*version) bool, error) {
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
	err := d.do(ctx, "refresh", l.Key, func(ctx context.Context) error {
		return d.apply(ctx, l.Key, func(cur *version, now span) (*version, func(*version) bool, error) {
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
	return d.do(ctx, "release", l.Key, func(ctx context.Context) error {
		return d.apply(ctx, l.Key, func(cur *version, now span) (*version, func(*version) bool, error) {
			next, h, err := drop(cur, l, now)
			return next, func(top *version) bool { return lacks(top, []hold{h}) }, err
		})
	})
}
