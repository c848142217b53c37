package mongodriver_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/mongodriver"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// naiveLock is the classic MongoDB lock that ShedLock's Mongo provider
// and square/mongo-lock use, with the token a .NET provider ships: one
// document per key, taken by a conditional findOneAndUpdate with upsert
// when free or expired, released by deleteOne({_id, owner}). On MongoDB
// each of these is atomic; on FerretDB each is a query followed by a
// separate write by _id. The tests below run it against the same server
// as the driver, to show why the driver does not work this way.
type naiveLock struct{ coll *mongo.Collection }

// acquire takes key for owner until now+ttl and returns its token,
// $ifNull(token, 0)+1 as the peers compute it, or 0 when the key is held.
func (n naiveLock) acquire(ctx context.Context, key, owner string, ttl time.Duration) (uint64, error) {
	now := time.Now()
	filter := bson.D{{Key: "_id", Value: key}, {Key: "$or", Value: bson.A{
		bson.D{{Key: "exp", Value: bson.D{{Key: "$lt", Value: now}}}},
		bson.D{{Key: "exp", Value: bson.D{{Key: "$exists", Value: false}}}},
	}}}
	update := bson.D{
		{Key: "$set", Value: bson.D{{Key: "owner", Value: owner}, {Key: "exp", Value: now.Add(ttl)}}},
		{Key: "$inc", Value: bson.D{{Key: "token", Value: int64(1)}}},
	}
	var doc struct {
		Token int64 `bson:"token"`
	}
	err := n.coll.FindOneAndUpdate(ctx, filter, update,
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&doc)
	switch {
	case mongo.IsDuplicateKeyError(err):
		return 0, nil // held: the upsert's insert met the holder's document
	case err != nil:
		return 0, err
	}
	return uint64(doc.Token), nil
}

// release deletes key's document if owner holds it, and returns
// driver.ErrNotHeld when it deleted nothing.
func (n naiveLock) release(ctx context.Context, key, owner string) error {
	r, err := n.coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: key}, {Key: "owner", Value: owner}})
	if err == nil && r.DeletedCount == 0 {
		err = driver.ErrNotHeld
	}
	return err
}

// expire makes the document of each key an expired hold of nobody.
func (n naiveLock) expire(ctx context.Context, keys []string) error {
	for _, key := range keys {
		_, err := n.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: key}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "owner", Value: "gone"}, {Key: "exp", Value: time.Now().Add(-time.Hour)}}}},
			options.UpdateOne().SetUpsert(true))
		if err != nil {
			return err
		}
	}
	return nil
}

// takeovers makes one expired hold per round with expire, then races
// racers goroutines, each with a client of its own, to take over each
// round's key with take, and returns how many rounds had more than one
// winner, and the winners in all.
func takeovers(t *testing.T, rounds, racers int, expire func(ctx context.Context, keys []string) error,
	take func(ctx context.Context, i int, key string) (bool, error)) (overlaps, winners int) {
	t.Helper()
	ctx := ctxT(t)
	keys := make([]string, rounds)
	for r := range keys {
		keys[r] = "race/" + owner()
	}
	if err := expire(ctx, keys); err != nil {
		t.Fatal(err)
	}
	for r, key := range keys {
		var won atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range racers {
			wg.Go(func() {
				<-start
				ok, err := take(ctx, i, key)
				if err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("round %d racer %d: %v", r, i, err)
				}
				if ok {
					won.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		if n := int(won.Load()); n > 1 {
			overlaps++
			winners += n
		} else {
			winners += n
		}
	}
	return overlaps, winners
}

// TestNaiveLockOverlaps shows the naive lock failing exclusion on the
// server the driver's tests run against: racers that take over the same
// expired key at once all win, round after round. On MongoDB the same
// code would give one winner per round; the test then skips.
func TestNaiveLockOverlaps(t *testing.T) {
	srv := server(t)
	if srv.Addr == "" {
		t.Skip("an external server: the naive lock's overlap is FerretDB's, not MongoDB's")
	}
	const rounds, racers = 30, 8
	db := database(t)
	naive := make([]naiveLock, racers)
	for i := range naive {
		naive[i] = naiveLock{locks(t, srv, db)}
	}
	overlaps, winners := takeovers(t, rounds, racers, naive[0].expire,
		func(ctx context.Context, i int, key string) (bool, error) {
			tok, err := naive[i].acquire(ctx, key, owner(), time.Minute)
			return tok != 0, err
		})
	t.Logf("naive findOneAndUpdate lock: %d winners in %d rounds of %d racers; %d rounds with more than one", winners, rounds, racers, overlaps)
	if overlaps == 0 {
		t.Errorf("the naive lock gave one winner per round: FerretDB's conditional writes were atomic here, and the driver's design reason is not shown")
	}
}

// TestTakeoverExclusive runs the race of TestNaiveLockOverlaps on the
// driver: one winner per round, always.
func TestTakeoverExclusive(t *testing.T) {
	srv := server(t)
	const rounds, racers = 30, 8
	db := database(t)
	ds := make([]*mongodriver.Driver, racers)
	for i := range ds {
		ds[i] = newDriverOn(t, srv, db)
	}
	expire := func(ctx context.Context, keys []string) error {
		for _, key := range keys {
			if _, err := ds[0].TryAcquire(ctx, req(key, owner(), mongodriver.MinTTL)); err != nil {
				return err
			}
		}
		time.Sleep(mongodriver.MinTTL + time.Second)
		return nil
	}
	overlaps, winners := takeovers(t, rounds, racers, expire, func(ctx context.Context, i int, key string) (bool, error) {
		_, err := ds[i].TryAcquire(ctx, req(key, owner(), time.Minute))
		if errors.Is(err, driver.ErrLocked) {
			return false, nil
		}
		return err == nil, err
	})
	t.Logf("mongodriver: %d winners in %d rounds of %d racers", winners, rounds, racers)
	if overlaps != 0 || winners != rounds {
		t.Errorf("%d rounds with more than one winner, %d winners in %d rounds; want one per round", overlaps, winners, rounds)
	}
}
