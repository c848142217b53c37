package zkdriver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
	"github.com/go-zookeeper/zk"
)

// DefaultRoot is the parent of all lock nodes when Options.Root is empty.
const DefaultRoot = "/locker"

// MinTTL is the shortest lease Capabilities report; the longest is the
// negotiated session timeout.
const MinTTL = time.Millisecond

// Options configures a Driver. The zero value, like a nil *Options, selects
// the defaults.
type Options struct {
	// Root is the absolute path, outside /zookeeper, under which the
	// driver keeps one node per lock key; empty means DefaultRoot. The
	// driver creates it (and its ancestors) when it is missing.
	Root string
	// ACL is the access control list of every node the driver creates.
	// It must give the connection's own identity read, write, create and
	// delete. Nil means zk.WorldACL(zk.PermAll), under which any client
	// of the ensemble may delete lock nodes; with a digest ACL, such as
	// zk.DigestACL(zk.PermAll, user, password) after
	// conn.AddAuth("digest", []byte(user+":"+password)), other tenants
	// can neither delete nor create them (their lock calls fail with a
	// permanent error wrapping zk.ErrNoAuth).
	ACL []zk.ACL
	// Layout names the lock nodes: LayoutLocker (the zero value) or a
	// Curator layout (see the package documentation, "Apache Curator").
	Layout Layout
	// SessionTimeout is the session timeout the server negotiated for a
	// connection made without a Session's ConnOption, which therefore
	// cannot be read (go-zookeeper keeps it to itself). New requires it
	// then; TTLs above it are refused. The server grants the timeout
	// asked for in zk.Connect within its minSessionTimeout and
	// maxSessionTimeout: set no more than the timeout granted.
	SessionTimeout time.Duration
}

// Driver is a locker driver over a go-zookeeper connection. It is safe for
// concurrent use. Create it with New or Connect.
type Driver struct {
	conn   *zk.Conn
	sess   *Session
	root   string
	acl    []zk.ACL
	layout Layout
	owned  bool          // made by Connect: Close closes conn
	quit   chan struct{} // closed by Close

	declared time.Duration // Options.SessionTimeout

	mu      sync.Mutex
	nodes   map[nodeKey]*node
	obs     *driverkit.LRU[string, observation] // by parent path: the observed first node
	hot     driverkit.Contention                // keys seen contended
	parents *driverkit.LRU[string, struct{}]    // key nodes known to exist
	closed  bool

	followed *zkSession  // the last session follow was called with
	unfollow func() bool // stops the call of sessionEnded for followed
}

var (
	_ driver.Driver         = (*Driver)(nil)
	_ driver.Describer      = (*Driver)(nil)
	_ driver.Acquirer       = (*Driver)(nil)
	_ driver.LossWatcher    = (*Driver)(nil)
	_ driver.BatchRefresher = (*Driver)(nil)
)

// nodeKey identifies a lock node of this driver: one per key and owner.
type nodeKey struct{ key, owner string }

// node is one of the driver's lock nodes: a hold, a place in a queue, or a
// create whose outcome is not known.
type node struct {
	key, owner string
	mode       driver.Mode
	parent     string
	path       string        // "" while a create's outcome is unknown
	czxid      int64         // the fencing token
	session    int64         // the session that created it
	ttl        time.Duration // the lease length in the node's data
	written    time.Time     // send time of the last confirmed write of the node
	granted    bool          // a hold, not a place in the queue
	lost       error         // the session ended: the node is gone
	watches    []*lossWatch

	limit, weight int64  // a counted node's, else 0
	value         string // published with the hold, in the node's data

	ops      createOps     // the create's requests; see create
	watch0   [1]*lossWatch // watches' storage for the usual single watch
	loss0    lossWatch     // the first WatchLoss's callback, when loss0Set
	loss0Set bool
}

// New returns a Driver that uses conn, a connection made by go-zookeeper's
// zk.Connect, with sess.ConnOption() among its options when sess is not
// nil. Without a Session, opts must set SessionTimeout (see Session). The
// driver does not close conn.
func New(conn *zk.Conn, sess *Session, opts *Options) (*Driver, error) {
	if conn == nil {
		return nil, errors.New("zkdriver: nil *zk.Conn")
	}
	if sess == nil {
		sess = new(Session)
	}
	if err := sess.bind(conn); err != nil {
		return nil, err
	}
	d := &Driver{
		conn:    conn,
		sess:    sess,
		quit:    make(chan struct{}),
		root:    DefaultRoot,
		acl:     zk.WorldACL(zk.PermAll),
		nodes:   make(map[nodeKey]*node),
		obs:     driverkit.NewLRU[string, observation](maxObserved),
		hot:     driverkit.Contention{Window: hotFor, Max: maxHot},
		parents: driverkit.NewLRU[string, struct{}](maxParents),
	}
	if opts != nil {
		if opts.Root != "" {
			d.root = opts.Root
		}
		if opts.ACL != nil {
			if len(opts.ACL) == 0 {
				return nil, errors.New("zkdriver: empty ACL")
			}
			d.acl = opts.ACL
		}
		if opts.Layout < LayoutLocker || opts.Layout > LayoutCuratorReadWrite {
			return nil, fmt.Errorf("zkdriver: unknown %v", opts.Layout)
		}
		d.layout = opts.Layout
		d.declared = opts.SessionTimeout
	}
	if err := checkRoot(d.root); err != nil {
		return nil, err
	}
	sess.mu.Lock()
	sniffed := sess.sniffed
	sess.mu.Unlock()
	if !sniffed && d.declared <= 0 {
		return nil, errors.New("zkdriver: the connection's session timeout is unknown: pass a Session whose ConnOption was among zk.Connect's options, or set Options.SessionTimeout")
	}
	return d, nil
}

// Connect connects to the ZooKeeper servers like zk.Connect, waits until
// the first session is established or ctx is done, and returns a Driver
// that owns the new connection. zkOpts are go-zookeeper's connection
// options (not zk.WithDialer or zk.WithEventCallback: the Session made for
// the connection sets both; see Session); the connection uses
// ReconnectAtOnce unless they set another host provider.
func Connect(ctx context.Context, servers []string, sessionTimeout time.Duration, opts *Options, zkOpts ...func(*zk.Conn)) (*Driver, error) {
	sess := new(Session)
	conn, _, err := zk.Connect(servers, sessionTimeout, func(c *zk.Conn) {
		ReconnectAtOnce()(c)
		for _, o := range zkOpts {
			o(c)
		}
		sess.ConnOption()(c)
	})
	if err != nil {
		return nil, err
	}
	d, err := New(conn, sess, opts)
	if err != nil {
		conn.Close()
		return nil, err
	}
	d.owned = true
	if err := d.sess.Wait(ctx); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// Conn returns the driver's connection.
func (d *Driver) Conn() *zk.Conn { return d.conn }

// Session returns the Session that follows the driver's connection.
func (d *Driver) Session() *Session { return d.sess }

// ErrClosed is wrapped by the errors of a closed Driver's methods, which
// driver.IsPermanent reports.
var ErrClosed = fmt.Errorf("zkdriver: %w", driver.ErrClosed)

// Close ends the driver: its holds are reported lost to WatchLoss, and
// later calls fail with a permanent error wrapping ErrClosed. A driver made
// by Connect also closes its connection, which ends its session and
// deletes its nodes; one made by New leaves the connection to its owner.
func (d *Driver) Close() error {
	d.mu.Lock()
	again := d.closed
	d.closed = true
	var fire []*lossWatch
	for _, n := range d.nodes {
		fire = append(fire, n.lose(ErrClosed)...)
	}
	unfollow := d.unfollow
	d.mu.Unlock()
	if again {
		return nil // the first Close found every watch
	}
	close(d.quit)
	if unfollow != nil {
		unfollow()
	}
	fireAll(fire, fmt.Errorf("%w: %w", driver.ErrNotHeld, ErrClosed))
	if d.owned {
		d.conn.Close()
	}
	return nil
}

// Capabilities implements driver.Describer: shared and counted holds
// (not in the Curator layouts; see Layout), values, Acquire, WatchLoss,
// RefreshBatch and Inspect. MaxTTL is the negotiated session timeout
// (Options.SessionTimeout without a Session that reads it; before the
// first session, the one asked for).
func (d *Driver) Capabilities() driver.Capabilities {
	return driver.Capabilities{
		Shared: d.layout != LayoutCuratorMutex, Counted: d.layout == LayoutLocker, Values: true,
		MinTTL: MinTTL, MaxTTL: d.maxTTL(), MaxTTLSource: "the ZooKeeper session timeout",
		Unsupported: d.layout.unsupported(),
		Acquire:     true, WatchLoss: true, RefreshBatch: true, Inspect: true,
	}
}

// maxTTL is Capabilities' MaxTTL: the session timeout, or before the first
// session the one asked for (0 before the connect request: no limit yet;
// the first call checks the TTL).
func (d *Driver) maxTTL() time.Duration {
	if t := d.timeout(d.sess.current()); t > 0 {
		return t
	}
	return time.Duration(d.sess.requested.Load())
}

// checkTTL rejects a TTL longer than the session timeout limit (0: not
// known yet): the front-end checked it against an earlier session's.
func checkTTL(ttl, limit time.Duration) error {
	if limit > 0 && ttl > limit {
		return driver.Permanent(fmt.Errorf("zkdriver: TTL %v exceeds the ZooKeeper session timeout %v: a lease must not outlive the session that keeps its node; connect with a session timeout of at least %v (within the servers' maxSessionTimeout), or use a TTL of at most %v (locker.WithTTL)", ttl, limit, ttl, limit))
	}
	return nil
}

// paths returns the path of key's node and that path followed by "/" and
// the concatenation of name, in one allocation (every acquire builds both).
func (d *Driver) paths(key string, name ...string) (parent, child string) {
	root := strings.TrimSuffix(d.root, "/") // "/" is the only root with one
	size := len(root) + 3*len(key) + 4      // see writeKey; two slashes
	for _, s := range name {
		size += len(s)
	}
	var b strings.Builder
	b.Grow(size)
	b.WriteString(root)
	b.WriteByte('/')
	writeKey(&b, key)
	n := b.Len()
	if len(name) > 0 {
		b.WriteByte('/')
		for _, s := range name {
			b.WriteString(s)
		}
	}
	s := b.String()
	return s[:n], s
}

// begin checks what every call checks before any I/O.
func (d *Driver) begin(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return errorf(op, key, err)
	}
	if err := d.closedErr(); err != nil {
		return driver.Permanent(errorf(op, key, err))
	}
	return nil
}

// beginRequest is begin for the acquire calls, with the checks the
// front-end cannot make (the TTL against the current session's timeout,
// the layout) and driverkit.CheckCount, which every counting driver keeps.
func (d *Driver) beginRequest(ctx context.Context, op string, req driver.Request) error {
	if err := d.begin(ctx, op, req.Key); err != nil {
		return err
	}
	if err := checkTTL(req.TTL, d.timeout(d.sess.current())); err != nil {
		return errorf(op, req.Key, err)
	}
	if err := cmp.Or(d.checkLayout(req), driverkit.CheckCount(req)); err != nil {
		return driver.Permanent(errorf(op, req.Key, err))
	}
	return nil
}

// errorf wraps err with the operation and key.
func errorf(op, key string, err error) error {
	return &driverkit.OpError{Driver: "zkdriver", Op: op, Key: key, Err: err}
}

// closedErr returns ErrClosed once the driver is closed, an error wrapping
// zk.ErrClosing once its connection is, and nil before.
func (d *Driver) closedErr() error {
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return ErrClosed
	}
	select {
	case <-d.sess.done():
		return errConnClosed
	default:
		return nil
	}
}

// final returns err as the driver's caller sees it: once the driver or its
// connection is closed, an error that is not ctx's own is permanent.
func (d *Driver) final(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() == nil {
		d.connGone(err) // the close of a connection made without a Session
	}
	return driverkit.Closed(ctx, err, d.closedErr())
}

// finalLease returns l, or no lease and final's error when err is not nil.
func (d *Driver) finalLease(ctx context.Context, l driver.Lease, err error) (driver.Lease, error) {
	if err != nil {
		return driver.Lease{}, d.final(ctx, err)
	}
	return l, nil
}

// isPermanent reports whether a ZooKeeper error can never go away by
// retrying the same call.
func isPermanent(err error) bool {
	return isAny(err, zk.ErrNoAuth, zk.ErrInvalidACL, zk.ErrAuthFailed, zk.ErrBadArguments, zk.ErrInvalidPath, zk.ErrNoChildrenForEphemerals, zk.ErrInvalidFlags)
}

// isAny reports whether err wraps one of targets.
func isAny(err error, targets ...error) bool {
	return slices.ContainsFunc(targets, func(t error) bool { return errors.Is(err, t) })
}

// callFailed names err, the failure of a call made with ctx: ctx's own
// error once ctx is done, else err, marked permanent when no retry can
// cure it.
func callFailed(ctx context.Context, op, key string, err error) error {
	if ctx.Err() != nil {
		return errorf(op, key, ctx.Err())
	}
	err = errorf(op, key, err)
	if isPermanent(err) && !driver.IsPermanent(err) {
		return driver.Permanent(err)
	}
	return err
}
