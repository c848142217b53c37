package zkdriver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/zkdriver/zk"
)

// A Session follows the ZooKeeper session of one *zk.Conn for the drivers
// that use the connection: which session is current, its negotiated
// timeout, and when it expires. go-zookeeper tells session events only to
// the code that made the connection, so pass ConnOption's option to
// zk.Connect, then the Session to New (see the package documentation).
// ConnOption installs an event callback: to use your own, set OnEvent
// rather than pass zk.WithEventCallback. One Session per connection.
type Session struct {
	// Dialer, if set, makes the network connections, as by zk.WithDialer.
	// Nil means net.DialTimeout, go-zookeeper's default.
	Dialer zk.Dialer
	// OnEvent, if set, is called with every event of the connection, as
	// by zk.WithEventCallback. It must not block.
	OnEvent zk.EventCallback

	mu        sync.Mutex
	conn      *zk.Conn             // set by ConnOption's option
	cur       *sessionState        // the session of the last successful connect; nil before
	drivers   map[*Driver]struct{} // drivers to tell of expiries
	bound     bool                 // ConnOption was called
	ready     chan struct{}        // closed at the first session
	readyOnce sync.Once
	lastState zk.State      // of the last session event
	reconn    chan struct{} // closed and replaced at each reconnection
}

// sessionState is one ZooKeeper session.
type sessionState struct {
	id      int64
	timeout time.Duration // negotiated
	expired chan struct{} // closed when the session is known to be over
	once    sync.Once
	err     error // why it ended; set before expired is closed
}

func (st *sessionState) end(err error) bool {
	ended := false
	st.once.Do(func() {
		st.err = err
		close(st.expired)
		ended = true
	})
	return ended
}

func (st *sessionState) over() bool {
	select {
	case <-st.expired:
		return true
	default:
		return false
	}
}

// errSessionEnded is the cause when a session ended without an expiry event.
var errSessionEnded = errors.New("zkdriver: the ZooKeeper session ended")

// errConnClosed is the cause when the connection was closed (zk.Conn.Close).
var errConnClosed = fmt.Errorf("the ZooKeeper connection was closed (%w)", zk.ErrClosing)

// ConnOption returns the zk.Connect option by which the Session follows
// the connection's session.
func (s *Session) ConnOption() func(*zk.Conn) {
	s.mu.Lock()
	s.bound = true
	s.init()
	s.mu.Unlock()
	return func(c *zk.Conn) {
		s.mu.Lock()
		s.conn = c
		s.mu.Unlock()
		if s.Dialer != nil {
			zk.WithDialer(s.Dialer)(c)
		}
		zk.WithEventCallback(s.event)(c)
	}
}

// init makes the Session's maps and channels; s.mu is held. ConnOption
// (which New requires) and Wait call it.
func (s *Session) init() {
	if s.drivers == nil {
		s.drivers = make(map[*Driver]struct{})
		s.ready = make(chan struct{})
		s.reconn = make(chan struct{})
	}
}

// reconnected returns a channel closed when the connection next has a
// session after a disconnection.
func (s *Session) reconnected() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reconn
}

// done returns a channel closed once the connection's Close was called,
// or nil before ConnOption's option was applied.
func (s *Session) done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return nil
	}
	return s.conn.Done()
}

// isClosed reports whether the connection was closed by its owner.
func (s *Session) isClosed() bool {
	select {
	case <-s.done():
		return true
	default:
		return false
	}
}

// Timeout returns the session timeout negotiated for the current session,
// or 0 before the first session was established.
func (s *Session) Timeout() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return 0
	}
	return s.cur.timeout
}

// ID returns the current session id, or 0 before the first session was
// established and after it expired until the next one is.
func (s *Session) ID() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil || s.cur.over() {
		return 0
	}
	return s.cur.id
}

// state returns the session with the given id if it is the current one,
// else nil: a session replaced by another is over.
func (s *Session) state(id int64) *sessionState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil || s.cur.id != id {
		return nil
	}
	return s.cur
}

// limit returns the current session's negotiated timeout, or before the
// first session the one requested, or 0.
func (s *Session) limit() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return 0
	}
	return s.conn.SessionTimeout()
}

// established records the session the server granted in answer to a
// connect request.
func (s *Session) established(id int64, timeout time.Duration) {
	s.mu.Lock()
	old := s.cur
	if old != nil && old.id == id {
		old.timeout = timeout
		s.mu.Unlock()
		return
	}
	st := &sessionState{id: id, timeout: timeout, expired: make(chan struct{})}
	s.cur = st
	s.mu.Unlock()
	s.readyOnce.Do(func() { close(s.ready) })
	if old != nil {
		s.expire(old, errSessionEnded)
	}
}

// expireCurrent ends the current session: the server said it expired.
func (s *Session) expireCurrent(err error) {
	s.mu.Lock()
	st := s.cur
	s.mu.Unlock()
	if st != nil {
		s.expire(st, err)
	}
}

// expire ends st and tells the drivers.
func (s *Session) expire(st *sessionState, err error) {
	if !st.end(err) {
		return
	}
	s.mu.Lock()
	ds := make([]*Driver, 0, len(s.drivers))
	for d := range s.drivers {
		ds = append(ds, d)
	}
	s.mu.Unlock()
	for _, d := range ds {
		d.sessionEnded(st.id, err)
	}
}

// event is the connection's event callback. The connection calls it from
// its own goroutine right after it changes state, so at StateHasSession
// it already has the new session's id and negotiated timeout.
func (s *Session) event(ev zk.Event) {
	if ev.Type == zk.EventSession {
		s.mu.Lock()
		last := s.lastState
		s.lastState = ev.State
		conn := s.conn
		s.mu.Unlock()
		switch {
		case ev.State == zk.StateExpired:
			s.expireCurrent(zk.ErrSessionExpired)
		case ev.State == zk.StateHasSession:
			s.established(conn.SessionID(), conn.SessionTimeout())
			if last != zk.StateHasSession {
				s.mu.Lock()
				close(s.reconn)
				s.reconn = make(chan struct{})
				s.mu.Unlock()
			}
		case ev.State == zk.StateDisconnected && s.isClosed():
			s.expireCurrent(errConnClosed)
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
	s.init()
	ready := s.ready
	s.mu.Unlock()
	select {
	case <-ready:
		return nil
	case <-s.done():
		select {
		case <-ready:
			return nil // established before the close
		default:
		}
		return driver.Permanent(fmt.Errorf("zkdriver: waiting for a ZooKeeper session: %w", errConnClosed))
	case <-ctx.Done():
		return fmt.Errorf("zkdriver: waiting for a ZooKeeper session: %w", ctx.Err())
	}
}
