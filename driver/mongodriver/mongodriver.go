package mongodriver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

const (
	// DefaultDatabase is the database of the lock collection when
	// Options.Database is empty.
	DefaultDatabase = "locker"
	// DefaultCollection is the lock collection when Options.Collection
	// is empty.
	DefaultCollection = "locker_locks"
	// MinTTL is the shortest TTL the driver accepts: a change takes three
	// round trips, each a write or read of the database, and a lease must
	// leave room for renewals that take that long.
	MinTTL = 2 * time.Second
	// MaxTTL is the longest TTL the driver accepts.
	MaxTTL = 365 * 24 * time.Hour
)

// ErrClosed is why every call of a closed Driver fails: its errors wrap
// it and driver.ErrClosed, marked permanent.
var ErrClosed = errors.New("mongodriver: driver closed")

// errNoReply is wrapped by the error of a call that got no reply within
// its lease's TTL.
var errNoReply = errors.New("no reply within the lease's TTL")

// Options configures a Driver. The zero value uses DefaultDatabase and
// DefaultCollection.
type Options struct {
	// Database names the database of the lock collection.
	Database string
	// Collection names the lock collection. It needs no setup; an index
	// on {k: 1, v: -1} (CreateIndex) keeps reads of a key cheap when it
	// holds many keys.
	Collection string
}

func (o *Options) names() (db, coll string) {
	db, coll = DefaultDatabase, DefaultCollection
	if o != nil && o.Database != "" {
		db = o.Database
	}
	if o != nil && o.Collection != "" {
		coll = o.Collection
	}
	return db, coll
}

// Driver is a locker driver over a MongoDB collection. It is safe for
// concurrent use. Close ends it; the client stays open.
type Driver struct {
	coll  *mongo.Collection
	clock *clock

	life  context.Context // ended by Close
	end   context.CancelFunc
	mu    sync.RWMutex   // orders calls.Add before Close's Wait
	calls sync.WaitGroup // calls under way, and the collector
	gc    collector
	cache versionCache
	errs  driverkit.Errors
}

var (
	_ driver.Driver    = (*Driver)(nil)
	_ driver.Describer = (*Driver)(nil)
)

// New returns a driver that keeps its locks in a collection of client
// (see Options), with write concern majority, read concern majority and
// primary reads, whatever the client's defaults. It makes no request.
func New(client *mongo.Client, opts *Options) (*Driver, error) {
	if client == nil {
		return nil, errors.New("mongodriver: nil client")
	}
	dbName, collName := opts.names()
	db := client.Database(dbName)
	coll := db.Collection(collName, options.Collection().
		SetWriteConcern(writeconcern.Majority()).
		SetReadConcern(readconcern.Majority()).
		SetReadPreference(readpref.Primary()))
	life, end := context.WithCancel(context.Background())
	d := &Driver{coll: coll, clock: newClock(db), life: life, end: end}
	d.errs = driverkit.Errors{Driver: "mongodriver", Closed: d.closedErr}
	return d, nil
}

// CreateIndex creates the index {k: 1, v: -1} on the driver's collection,
// by which the driver finds a key's current version. It may be called by
// every process at startup. Without it every read scans the collection.
func (d *Driver) CreateIndex(ctx context.Context) error {
	_, err := d.coll.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys: bson.D{{Key: "k", Value: 1}, {Key: "v", Value: -1}},
	})
	if err != nil {
		return errors.Join(errors.New("mongodriver: create index"), err)
	}
	return nil
}

// Capabilities implements driver.Describer: every mode and request
// (Shared, Counted, Values) and Inspect; no Notify, Queue or Acquire (see
// Waiting in the package documentation).
func (d *Driver) Capabilities() driver.Capabilities {
	return driver.Capabilities{
		Shared: true, Counted: true, Values: true, Inspect: true,
		MinTTL: MinTTL, MaxTTL: MaxTTL, TTLUnit: time.Microsecond,
	}
}

// Close ends the driver: calls under way return at once and every later
// call returns a permanent error wrapping ErrClosed. It waits for the
// calls under way and for the deletion of old versions under way (see
// Growth in the package documentation), and never closes the client.
func (d *Driver) Close() error {
	d.mu.Lock()
	d.end()
	d.mu.Unlock()
	d.calls.Wait()
	return nil
}

// closedErr says why the driver or its client is closed, or nil.
func (d *Driver) closedErr(err error) error {
	switch {
	case d.life.Err() != nil:
		return ErrClosed
	case errors.Is(err, mongo.ErrClientDisconnected):
		return mongo.ErrClientDisconnected
	}
	return nil
}

// do runs f with ctx, ended also by Close and, when ttl is not 0, after
// ttl, and returns its error named by d.errs. A call is useless once the
// lease it asks for or renews has run out, and a request whose bytes a
// network fault swallowed would otherwise wait for its reply until ctx
// ends: the MongoDB driver closes the connection of a request it
// abandons, and the front-end retries on another.
func (d *Driver) do(ctx context.Context, op, key string, ttl time.Duration, f func(ctx context.Context) error) error {
	if err := d.errs.Begin(ctx, op, key); err != nil {
		return err
	}
	if !d.enter() {
		return d.errs.Begin(ctx, op, key) // closed meanwhile
	}
	defer d.calls.Done()
	return d.errs.Wrap(ctx, op, key, d.run(ctx, ttl, f))
}

// enter counts a call under way, unless the driver is closed.
func (d *Driver) enter() bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.life.Err() != nil {
		return false
	}
	d.calls.Add(1)
	return true
}

func (d *Driver) run(ctx context.Context, ttl time.Duration, f func(ctx context.Context) error) error {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if ttl > 0 {
		var stop context.CancelFunc
		cctx, stop = context.WithTimeout(cctx, ttl)
		defer stop()
	}
	defer context.AfterFunc(d.life, cancel)()
	err := f(cctx)
	if err != nil && ctx.Err() == nil && d.life.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
		// Not the caller's deadline: no context error in the chain.
		return fmt.Errorf("%w (%v): %v", errNoReply, ttl, err)
	}
	return err
}
