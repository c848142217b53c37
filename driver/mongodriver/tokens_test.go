package mongodriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/mongodriver"
	"github.com/go-locker/locker/internal/ferrettest"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// tokenLock is what the token scenario needs of a lock design: take the
// key (returning its token), give it up, and the test's hands on the
// server (delete every document of the key, as an operator or a TTL index
// would, and restart the server).
type tokenLock interface {
	acquire(ctx context.Context, key string, ttl time.Duration) (uint64, error)
	release(ctx context.Context) error
}

// tokenScenario takes key through releases, an expiry, the deletion of
// its documents and a server restart, with a new lock from mk after the
// restart, and returns the tokens of its grants in order, with a label
// for each.
func tokenScenario(t *testing.T, srv *ferrettest.Server, db string, mk func(t *testing.T) tokenLock) ([]uint64, []string) {
	t.Helper()
	ctx := ctxT(t)
	key := "tokens/" + owner()
	var toks []uint64
	var labels []string
	take := func(l tokenLock, label string, ttl time.Duration) {
		t.Helper()
		tok, err := l.acquire(ctx, key, ttl)
		if err != nil || tok == 0 {
			t.Fatalf("%s: token %d, %v", label, tok, err)
		}
		toks, labels = append(toks, tok), append(labels, label)
	}
	l := mk(t)
	for i := range 3 {
		take(l, "grant "+string(rune('1'+i)), time.Minute)
		release(t, l)
	}
	take(l, "short grant", mongodriver.MinTTL)
	time.Sleep(mongodriver.MinTTL + time.Second)
	other := mk(t)
	take(other, "after an expiry", time.Minute)
	if err := l.release(ctx); err == nil {
		t.Errorf("the expired holder's release succeeded")
	}
	release(t, other)
	deleteKey(t, srv, db, key) // as an operator, or a TTL index, would
	take(l, "after the key's documents were deleted", time.Minute)
	release(t, l)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	take(mk(t), "after a server restart", time.Minute)
	return toks, labels
}

func release(t *testing.T, l tokenLock) {
	t.Helper()
	if err := l.release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// deleteKey deletes every document of key: the driver's versions (k) and
// the naive lock's document (_id).
func deleteKey(t *testing.T, srv *ferrettest.Server, db, key string) {
	t.Helper()
	c := locks(t, srv, db)
	for _, f := range []bson.D{{{Key: "k", Value: key}}, {{Key: "_id", Value: key}}} {
		if _, err := c.DeleteMany(ctxT(t), f); err != nil {
			t.Fatal(err)
		}
	}
}

// increasing returns the first grant whose token is not greater than the
// one before, or -1.
func increasing(toks []uint64) int {
	for i := 1; i < len(toks); i++ {
		if toks[i] <= toks[i-1] {
			return i
		}
	}
	return -1
}

// driverLock is tokenLock over the driver.
type driverLock struct {
	d *mongodriver.Driver
	l driver.Lease
}

func (x *driverLock) acquire(ctx context.Context, key string, ttl time.Duration) (uint64, error) {
	l, err := x.d.TryAcquire(ctx, req(key, owner(), ttl))
	x.l = l
	return l.Token, err
}

func (x *driverLock) release(ctx context.Context) error { return x.d.Release(ctx, x.l) }

// naiveTokens is tokenLock over the naive lock.
type naiveTokens struct {
	n          naiveLock
	key, owner string
}

func (x *naiveTokens) acquire(ctx context.Context, key string, ttl time.Duration) (uint64, error) {
	x.key, x.owner = key, owner()
	return x.n.acquire(ctx, key, x.owner, ttl)
}

func (x *naiveTokens) release(ctx context.Context) error { return x.n.release(ctx, x.key, x.owner) }

// TestTokensNeverReset checks that the driver's tokens increase strictly
// across releases, an expiry, the deletion of every document of the key
// and a restart of the server on its store; and that the naive design,
// whose token is $ifNull(token, 0)+1 on a document that release deletes,
// fails the same check.
func TestTokensNeverReset(t *testing.T) {
	srv := ferrettest.Private(t)
	db := database(t)
	t.Run("driver", func(t *testing.T) {
		toks, labels := tokenScenario(t, srv, db, func(t *testing.T) tokenLock {
			c := connect(t, srv.URI)
			d, err := mongodriver.New(c, &mongodriver.Options{Database: db})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = d.Close() })
			return &driverLock{d: d}
		})
		t.Logf("tokens: %v", toks)
		if i := increasing(toks); i >= 0 {
			t.Errorf("%s: token %d after %d; want strictly increasing tokens: %v", labels[i], toks[i], toks[i-1], toks)
		}
	})
	t.Run("naive", func(t *testing.T) {
		toks, labels := tokenScenario(t, srv, db, func(t *testing.T) tokenLock {
			return &naiveTokens{n: naiveLock{locks(t, srv, db)}}
		})
		i := increasing(toks)
		t.Logf("tokens: %v; first reset: %d", toks, i)
		if i < 0 {
			t.Errorf("the naive design's tokens increased: %v; the scenario does not catch a reset", toks)
		} else {
			t.Logf("naive design: %s got token %d after %d", labels[i], toks[i], toks[i-1])
		}
	})
}
