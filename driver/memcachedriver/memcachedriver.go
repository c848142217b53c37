package memcachedriver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
)

// DefaultPrefix is the key prefix used when Options.Prefix is empty.
const DefaultPrefix = "locker:"

// expirySlack is what the driver adds, in seconds, to a lease's TTL to get
// the expiration time of its hold item: memcached's clock ticks once a
// second, and an item stored with expiration time E can expire after
// little more than E-2 seconds (see docs/memcachedriver.md).
const expirySlack = 2

// pendingExptime is the expiration time, in seconds, of a hold item that
// is not yet a grant: it lives until memcached's next clock tick, at most
// about a second, which is enough for the three round trips that turn it
// into a grant, and short enough that one left behind by an attempt that
// gave up between them blocks the key briefly.
const pendingExptime = 1

// maxRelative is the longest expiration time memcached reads as relative
// to now, in seconds (30 days); a larger one is a Unix time.
const maxRelative = 30 * 24 * 60 * 60

// TTL limits reported by Capabilities. memcached expires items in whole
// seconds, so the TTLUnit is a second. A hold item outlives
// its lease by up to 3 seconds (see docs/memcachedriver.md); MinTTL
// keeps that overrun no longer than the lease itself, so that a hold that
// is not renewed is gone within twice its TTL. MaxTTL is 30 days less the
// driver's slack, so that the hold item's expiration time stays within
// the 30 days that memcached reads as relative to now.
const (
	MinTTL = 3 * time.Second
	MaxTTL = (maxRelative - expirySlack) * time.Second
)

// Options configures a Driver. The zero value, like a nil *Options, selects
// the defaults.
type Options struct {
	// Prefix starts the memcached key of every item the driver uses. It
	// must not contain spaces, control characters or DEL, and may be at
	// most 184 bytes long, so that every key fits in memcached's 250.
	// Empty means DefaultPrefix.
	Prefix string
}

// Driver is a locker driver over a memcached client. It is safe for
// concurrent use. Create it with New.
type Driver struct {
	client *memcache.Client
	prefix string

	errs driverkit.Errors // names the errors of the driver's calls

	closed context.Context // done once Close is called
	close  context.CancelFunc

	mu      sync.Mutex     // orders Close and the start of a call
	running sync.WaitGroup // calls under way, abandoned ones included
}

var (
	_ driver.Driver    = (*Driver)(nil)
	_ driver.Describer = (*Driver)(nil)
)

// New returns a Driver that uses client. opts may be nil. The driver does
// not close client: see Close.
func New(client *memcache.Client, opts *Options) (*Driver, error) {
	if client == nil {
		return nil, errors.New("memcachedriver: nil client")
	}
	prefix := DefaultPrefix
	if opts != nil && opts.Prefix != "" {
		prefix = opts.Prefix
	}
	if err := checkPrefix(prefix); err != nil {
		return nil, fmt.Errorf("memcachedriver: %w", err)
	}
	d := &Driver{client: client, prefix: prefix}
	d.closed, d.close = context.WithCancel(context.Background())
	d.errs = driverkit.Errors{Driver: "memcachedriver", Closed: d.closedErr, Permanent: isPermanent}
	return d, nil
}

// Close ends the driver: every later call returns at once an error
// wrapping driver.ErrClosed, marked with driver.Permanent, and so do calls under
// way, without waiting for their request. Close then waits for those
// requests to end, which gomemcache bounds by the client's Timeout per
// request, and returns. It does not close the client, which the caller
// owns (and whose own Close only drops idle connections, leaving it
// usable). Close is idempotent.
func (d *Driver) Close() error {
	d.mu.Lock()
	d.close()
	d.mu.Unlock()
	d.running.Wait()
	return nil
}

// Capabilities implements driver.Describer: TTLs from MinTTL to MaxTTL in
// whole seconds (memcached's expiration times are in seconds, and the
// driver does not round), and Inspect. The driver grants exclusive holds
// only, keeps no queue and does not notify (see the package
// documentation).
func (d *Driver) Capabilities() driver.Capabilities {
	return driver.Capabilities{MinTTL: MinTTL, MaxTTL: MaxTTL, TTLUnit: time.Second, Inspect: true}
}

// isPermanent reports whether err, from gomemcache, is one that no retry
// of the same request can cure: a key memcached cannot take, a client
// without servers, a request the server calls malformed (CLIENT_ERROR, as
// an incr of a value that is not a number gets) or does not know (ERROR).
// SERVER_ERROR replies, such as out of memory, may go away and are not.
func isPermanent(err error) bool {
	if errors.Is(err, memcache.ErrMalformedKey) || errors.Is(err, memcache.ErrNoServers) {
		return true
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "memcache: client error") ||
		strings.Contains(msg, `"CLIENT_ERROR`) ||
		strings.Contains(msg, `"ERROR\r\n"`)
}
