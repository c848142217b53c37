package natsdriver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultBucket is the bucket used when Options.Bucket is empty.
const DefaultBucket = "locker"

// MarkerTTL is how long the markers of released and expired holds stay
// in the bucket: the per-key TTL of the purge marker a Release writes,
// and the LimitMarkerTTL of a bucket the driver creates. It is the
// shortest TTL JetStream accepts on a message. Watchers see a marker when
// it is written; once it expires nothing of the key is left.
const MarkerTTL = time.Second

// MinTTL is the shortest lease the driver grants: JetStream's per-message
// TTLs are whole seconds, of at least one. Capabilities report TTLUnit a
// second too, so that no TTL is rounded.
const MinTTL = time.Second

// ErrClosed is driver.ErrClosed: every call of a Driver after its Close,
// or over a closed connection, returns an error wrapping it, marked
// permanent.
var ErrClosed = driver.ErrClosed

// ErrBucket is wrapped by the error of New for a bucket that cannot keep
// the driver's guarantees (see the package documentation).
var ErrBucket = errors.New("bucket cannot keep the lock guarantees")

// Options configures a Driver. The zero value, like a nil *Options, selects
// the defaults.
type Options struct {
	// Bucket names the key-value bucket of the locks. Empty means
	// DefaultBucket. New creates it when it does not exist.
	Bucket string
	// Replicas is the number of replicas of a bucket New creates (1 when
	// 0); a cluster should use 3. It is not checked on an existing bucket.
	Replicas int
}

// Driver is a locker driver over a JetStream key-value bucket. It is safe
// for concurrent use. Create it with New or NewConn.
type Driver struct {
	js     jetstream.JetStream
	nc     *nats.Conn
	kv     jetstream.KeyValue
	stream jetstream.Stream
	bucket string
	pre    string        // "$KV.<bucket>.", the subject prefix of the keys
	maxTTL time.Duration // the bucket's MaxAge, or 0

	closed   chan struct{} // closed by Close
	mu       sync.Mutex
	isClosed bool

	watch watchers
	revs  revCache
	errs  driverkit.Errors
}

var (
	_ driver.Driver    = (*Driver)(nil)
	_ driver.Describer = (*Driver)(nil)
	_ driver.Notifier  = (*Driver)(nil)
	_ driver.Inspector = (*Driver)(nil)
)

// NewConn is New over jetstream.New(nc).
func NewConn(ctx context.Context, nc *nats.Conn, opts *Options) (*Driver, error) {
	if nc == nil {
		return nil, errors.New("natsdriver: nil connection")
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("natsdriver: %w", err)
	}
	return New(ctx, js, opts)
}

// New returns a Driver over js and the bucket opts names, creating the
// bucket if it does not exist (see the package documentation for its
// settings) and refusing, with an error wrapping ErrBucket, one that
// cannot keep the driver's guarantees. opts may be nil. The driver does
// not close js's connection: see Close.
func New(ctx context.Context, js jetstream.JetStream, opts *Options) (*Driver, error) {
	if js == nil {
		return nil, errors.New("natsdriver: nil JetStream")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Bucket == "" {
		o.Bucket = DefaultBucket
	}
	kv, stream, err := openBucket(ctx, js, o)
	if err != nil {
		return nil, fmt.Errorf("natsdriver: bucket %q: %w", o.Bucket, err)
	}
	cfg := stream.CachedInfo().Config
	d := &Driver{
		js: js, nc: js.Conn(), kv: kv, stream: stream,
		bucket: o.Bucket, pre: "$KV." + o.Bucket + ".", maxTTL: cfg.MaxAge,
		closed: make(chan struct{}),
	}
	d.revs.init()
	d.errs = driverkit.Errors{Driver: "natsdriver", Closed: func(error) error { return d.closedErr() }}
	d.watch.init(func(key string, seq uint64) { d.revs.put(d.subject(key), seen{seq: seq}) })
	return d, nil
}

// openBucket returns the bucket o names and its stream, created with the
// driver's settings when it does not exist, and checked by checkBucket.
func openBucket(ctx context.Context, js jetstream.JetStream, o Options) (jetstream.KeyValue, jetstream.Stream, error) {
	kv, err := js.KeyValue(ctx, o.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, bucketConfig(o))
		if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			kv, err = js.KeyValue(ctx, o.Bucket) // created by another client meanwhile
		}
	}
	if err != nil {
		return nil, nil, err
	}
	stream, err := js.Stream(ctx, "KV_"+o.Bucket)
	if err != nil {
		return nil, nil, err
	}
	if err := checkBucket(stream.CachedInfo().Config); err != nil {
		return nil, nil, err
	}
	return kv, stream, nil
}

// bucketConfig is the configuration of a bucket the driver creates: file
// storage, one revision per key, per-key TTLs with markers that live
// MarkerTTL.
func bucketConfig(o Options) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:         o.Bucket,
		Description:    "locks of github.com/go-locker/locker",
		History:        1,
		Storage:        jetstream.FileStorage,
		Replicas:       max(o.Replicas, 1),
		LimitMarkerTTL: MarkerTTL,
	}
}

// checkBucket refuses a bucket whose stream cannot keep the guarantees.
func checkBucket(c jetstream.StreamConfig) error {
	var why string
	switch {
	case c.Storage != jetstream.FileStorage:
		why = "memory storage: a server restart empties it and restarts the revisions, the fencing tokens, at 1"
	case !c.AllowMsgTTL || c.SubjectDeleteMarkerTTL <= 0:
		why = "no per-key TTL (create it with LimitMarkerTTL set): holds would never expire"
	case c.Mirror != nil:
		why = "a mirror is read-only"
	case c.Sealed:
		why = "sealed"
	case !c.AllowRollup:
		why = "rollups are denied, which releases use"
	case c.Discard != jetstream.DiscardNew && (c.MaxMsgs > 0 || c.MaxBytes > 0):
		why = "limits that discard old messages would drop live holds"
	default:
		return nil
	}
	return fmt.Errorf("%w: %s", ErrBucket, why)
}

// Close ends the driver: every later call returns an error wrapping
// ErrClosed, marked with driver.Permanent, and its watchers stop. It does
// not close the connection, which the caller owns. Close is idempotent.
func (d *Driver) Close() error {
	d.mu.Lock()
	if !d.isClosed {
		d.isClosed = true
		close(d.closed)
	}
	d.mu.Unlock()
	d.watch.closeAll()
	return nil
}

// Capabilities implements driver.Describer: exclusive holds of whole
// seconds, from MinTTL up to the bucket's MaxAge when it has one, with
// values (elections); Notify and Inspect.
func (d *Driver) Capabilities() driver.Capabilities {
	return driver.Capabilities{
		MinTTL: MinTTL, MaxTTL: d.maxTTL, TTLUnit: time.Second,
		Values: true, Notify: true, Inspect: true,
	}
}

// errDriverClosed and errConnClosed say why a driver is closed.
var (
	errDriverClosed = errors.New("Close was called")
	errConnClosed   = errors.New("the NATS connection is closed")
)

// closedErr returns why the driver or its connection is closed, or nil
// while both are open (driverkit.Errors.Closed).
func (d *Driver) closedErr() error {
	select {
	case <-d.closed:
		return errDriverClosed
	default:
	}
	if d.nc != nil && d.nc.IsClosed() {
		return errConnClosed
	}
	return nil
}

// closedNow returns, while the driver is running a call, the error of a
// closed driver or connection, or nil.
func (d *Driver) closedNow(ctx context.Context) error {
	if why := d.closedErr(); why != nil {
		return driverkit.Closed(ctx, why, why)
	}
	return nil
}
