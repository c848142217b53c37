package zkdriver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
	"github.com/go-zookeeper/zk"
)

// A Session follows the ZooKeeper sessions of one *zk.Conn for the drivers
// that use it: which session is current, its negotiated timeout, and when
// it ends. go-zookeeper tells the negotiated timeout, and session events,
// only to the code that made the connection, so pass ConnOption's option
// to zk.Connect, then the Session to New: its dialer reads the session id
// and timeout from the server's answer to each connect request, and its
// event callback sees the connection closed. To use your own, set Dialer
// and OnEvent rather than pass zk.WithDialer or zk.WithEventCallback. One
// Session per connection. Its dialer also keeps the connection clear of
// go-zookeeper v1.0.4's data race on the last zxid seen (see sniffConn).
//
// A connection made without it (say, by a service-discovery library) still
// works: give New a nil Session and Options.SessionTimeout. The driver then
// reads the session id from the connection, and learns of an expiry or a
// close from a watch it keeps while it holds nodes (go-zookeeper ends every
// watch with zk.ErrSessionExpired or zk.ErrClosing). Such a connection
// keeps go-zookeeper's data race, which the race detector reports when it
// reconnects with watches set.
type Session struct {
	// Dialer, if set, makes the network connections; the Session wraps
	// it. Nil means net.DialTimeout, go-zookeeper's default.
	Dialer zk.Dialer
	// OnEvent, if set, is called with every event of the connection, as
	// by zk.WithEventCallback. It must not block.
	OnEvent zk.EventCallback

	mu        sync.Mutex
	conn      *zk.Conn
	sniffed   bool          // ConnOption's dialer reads the connect responses
	cur       *zkSession    // the current session, nil before the first
	next      chan struct{} // closed at the next session established
	closed    chan struct{} // closed once the connection is known closed
	closeOnce sync.Once
	lastState zk.State     // of the last session event
	zxid      atomic.Int64 // the last zxid of a reply (see sniffConn)
	requested atomic.Int64 // the timeout of the last connect request
}

// zkSession is one ZooKeeper session of a connection.
type zkSession struct {
	ID      int64
	timeout atomic.Int64 // negotiated; 0 when not read (no ConnOption)
	ctx     context.Context
	cancel  context.CancelCauseFunc
}

// Timeout returns the negotiated session timeout, or 0 when unknown.
func (s *zkSession) Timeout() time.Duration { return time.Duration(s.timeout.Load()) }

// Context is done once the session is over, with its cause.
func (s *zkSession) Context() context.Context { return s.ctx }

// errSessionEnded is the cause when a node's session is not the
// connection's current one.
var errSessionEnded = errors.New("zkdriver: the ZooKeeper session ended")

// errConnClosed is the cause when the connection was closed (zk.Conn.Close).
var errConnClosed = fmt.Errorf("the ZooKeeper connection was closed (%w): %w", zk.ErrClosing, driver.ErrClosed)

// init makes the Session's channels; s.mu is held.
func (s *Session) init() {
	if s.closed == nil {
		s.closed = make(chan struct{})
		s.next = make(chan struct{})
	}
}

// ConnOption returns the zk.Connect option by which the Session follows
// the connection's sessions.
func (s *Session) ConnOption() func(*zk.Conn) {
	return func(c *zk.Conn) {
		s.mu.Lock()
		s.init()
		s.conn, s.sniffed = c, true
		s.mu.Unlock()
		zk.WithDialer(s.dial)(c)
		zk.WithEventCallback(s.event)(c)
	}
}

// bind ties s to conn for New, unless it follows another connection.
func (s *Session) bind(conn *zk.Conn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil && s.conn != conn {
		return errors.New("zkdriver: the Session's ConnOption was passed to another connection")
	}
	s.init()
	s.conn = conn
	return nil
}

// current returns the connection's current session, or nil before the
// first one. Without ConnOption it is the connection's SessionID: a new
// id is a new session, and the id 0 after one means that one expired.
func (s *Session) current() *zkSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sniffed || s.conn == nil {
		return s.cur
	}
	id := s.conn.SessionID()
	if id != 0 && (s.cur == nil || s.cur.ID != id) {
		s.establishLocked(id, 0)
	} else if id == 0 && s.cur != nil {
		s.cur.cancel(zk.ErrSessionExpired)
	}
	return s.cur
}

// Timeout returns the session timeout negotiated for the current session,
// or 0 before the first session was established or when it is not known
// (the connection was made without ConnOption).
func (s *Session) Timeout() time.Duration {
	if cur := s.current(); cur != nil {
		return cur.Timeout()
	}
	return 0
}

// ID returns the current session id, or 0 before the first session was
// established and after it expired until the next one is.
func (s *Session) ID() int64 {
	if cur := s.current(); cur != nil && cur.ctx.Err() == nil {
		return cur.ID
	}
	return 0
}

// nextSession returns a channel closed the next time the connection is
// known to have a session: a new one, or, with ConnOption, the same one
// again after a reconnection (which may have lost watches).
func (s *Session) nextSession() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	return s.next
}

// done returns a channel closed once the connection is known closed.
func (s *Session) done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	return s.closed
}

// established records the session the server granted in answer to a
// connect request; a session it replaces is over.
func (s *Session) established(id int64, timeout time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.establishLocked(id, timeout)
}

func (s *Session) establishLocked(id int64, timeout time.Duration) {
	if old := s.cur; old == nil || old.ID != id {
		if old != nil {
			old.cancel(zk.ErrSessionExpired)
		}
		ctx, cancel := context.WithCancelCause(context.Background())
		s.cur = &zkSession{ID: id, ctx: ctx, cancel: cancel}
	}
	s.cur.timeout.Store(int64(timeout))
	close(s.next)
	s.next = make(chan struct{})
}

// end ends the session id, if it is the current one, with cause.
func (s *Session) end(id int64, cause error) {
	s.mu.Lock()
	cur := s.cur
	s.mu.Unlock()
	if cur != nil && (id == 0 || cur.ID == id) {
		cur.cancel(cause)
	}
}

// connClosed records that the connection was closed by its owner.
func (s *Session) connClosed() {
	s.mu.Lock()
	s.init()
	closed := s.closed
	s.mu.Unlock()
	s.closeOnce.Do(func() { close(closed) })
	s.end(0, zk.ErrClosing)
}

// event is the connection's event callback (ConnOption).
func (s *Session) event(ev zk.Event) {
	if ev.Type == zk.EventSession {
		s.mu.Lock()
		last := s.lastState
		s.lastState = ev.State
		s.mu.Unlock()
		if ev.State == zk.StateDisconnected && last == zk.StateConnecting {
			// Only a closed connection stops connecting: one closed
			// while disconnected sends no close request.
			s.connClosed()
		}
	}
	if s.OnEvent != nil {
		s.OnEvent(ev)
	}
}

// Wait waits until the connection has its first session, ctx is done, or
// the connection is closed (a permanent error).
func (s *Session) Wait(ctx context.Context) error {
	s.mu.Lock()
	conn := s.conn
	s.mu.Unlock()
	if conn == nil {
		return driver.Permanent(errors.New("zkdriver: the Session follows no connection: pass its ConnOption to zk.Connect, or the Session to New"))
	}
	// The Session reads a session before go-zookeeper stores its id, and
	// without ConnOption nothing tells: both are polled.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		next, closed := s.nextSession(), s.done()
		if cur := s.current(); cur != nil && conn.SessionID() == cur.ID {
			return nil
		}
		select {
		case <-next:
		case <-tick.C:
		case <-closed:
			if s.current() != nil {
				return nil // established before the close
			}
			return driver.Permanent(fmt.Errorf("zkdriver: waiting for a ZooKeeper session: %w", errConnClosed))
		case <-ctx.Done():
			return fmt.Errorf("zkdriver: waiting for a ZooKeeper session: %w", ctx.Err())
		}
	}
}

// state returns the connection's current session if its id is id, else
// nil: a node of another session is gone.
func (d *Driver) state(id int64) *zkSession {
	if cur := d.sess.current(); cur != nil && cur.ID == id {
		return cur
	}
	return nil
}

// live reports whether st is a session that is not over.
func live(st *zkSession) bool { return st != nil && st.ctx.Err() == nil }

// timeout returns st's negotiated timeout, or the one Options declared.
func (d *Driver) timeout(st *zkSession) time.Duration {
	if st != nil && st.Timeout() > 0 {
		return st.Timeout()
	}
	return d.declared
}

// follow arranges for sessionEnded to run when st, in which the driver
// made a node, is over; without ConnOption it also keeps a watch that
// tells of st's end (watchSession).
func (d *Driver) follow(st *zkSession) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.followed == st || d.closed {
		return
	}
	d.followed = st
	d.unfollow = context.AfterFunc(st.ctx, func() { d.sessionEnded(st.ID, context.Cause(st.ctx)) })
	d.sess.mu.Lock()
	sniffed := d.sess.sniffed
	d.sess.mu.Unlock()
	if !sniffed {
		go d.watchSession(st)
	}
}

// sessionWatch is the name, under the driver's root, of the node on which
// watchSession sets its exists watch: no key's node is named so (a key's
// leading '.' is written %2E), and the driver never creates it, so only
// go-zookeeper's end of the watch fires it.
const sessionWatch = ".session-watch"

// watchSession keeps an exists watch in st until st ends, the connection
// closes or the driver does, and tells the Session which of them.
func (d *Driver) watchSession(st *zkSession) {
	var retry driverkit.Backoff
	path := d.sessionWatchPath()
	for st.ctx.Err() == nil {
		before := d.conn.SessionID()
		_, _, ch, err := d.conn.ExistsW(path)
		if err == nil && before == st.ID && d.conn.SessionID() == st.ID {
			retry.Reset()
			select {
			case ev := <-ch:
				switch {
				case errors.Is(ev.Err, zk.ErrClosing):
					d.sess.connClosed()
					return
				case ev.Err != nil:
					d.sess.end(st.ID, ev.Err)
				}
				continue
			case <-d.quit:
				return
			}
		}
		if d.sess.current() != st || d.connGone(err) {
			return // a new session (st is over), or the connection closed
		}
		t := time.NewTimer(retry.Next())
		select {
		case <-t.C:
		case <-d.quit:
			t.Stop()
			return
		}
	}
}

// sessionWatchPath returns the path of the exists watch of watchSession.
func (d *Driver) sessionWatchPath() string {
	return strings.TrimSuffix(d.root, "/") + "/" + sessionWatch
}

// connGone reports whether err means that the connection was closed, and
// then tells the Session: zk.ErrClosing, or for a connection made without
// a Session (which reads the close request) zk.ErrConnectionClosed. A
// request made while go-zookeeper's state is StateDisconnected waits in
// its send queue while it reconnects, and fails at once only after Close:
// two such requests 50 ms apart, failing within 50 ms with the state
// unchanged, settle it.
func (d *Driver) connGone(err error) bool {
	if errors.Is(err, zk.ErrClosing) { // go-zookeeper's word after Close
		d.sess.connClosed()
		return true
	}
	d.sess.mu.Lock()
	sniffed := d.sess.sniffed
	d.sess.mu.Unlock()
	if sniffed || !errors.Is(err, zk.ErrConnectionClosed) {
		return false
	}
	path := d.sessionWatchPath()
	for i := range 2 {
		if i > 0 {
			time.Sleep(50 * time.Millisecond)
		}
		if d.conn.State() != zk.StateDisconnected {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err := driverkit.Call(ctx, func() (bool, error) { ok, _, err := d.conn.Exists(path); return ok, err }, nil)
		cancel()
		if !errors.Is(err, zk.ErrConnectionClosed) || d.conn.State() != zk.StateDisconnected {
			return false
		}
	}
	d.sess.connClosed()
	return true
}
