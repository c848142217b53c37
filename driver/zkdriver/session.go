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

// A Session shows the ZooKeeper session of a Driver's connection: its id
// and negotiated timeout, and a wait for the first one. The connection
// tracks its sessions itself (zk.Conn.Session), so a Session is optional:
// New makes one when given nil. ConnOption's option passes Dialer and
// OnEvent to zk.Connect, as zk.WithDialer and zk.WithEventCallback would.
type Session struct {
	// Dialer, if set, makes the network connections, as by zk.WithDialer.
	Dialer zk.Dialer
	// OnEvent, if set, is called with every event of the connection, as
	// by zk.WithEventCallback. It must not block.
	OnEvent zk.EventCallback

	mu   sync.Mutex
	conn *zk.Conn // set by ConnOption's option or New
}

// errSessionEnded is the cause when a node's session is not the
// connection's current one.
var errSessionEnded = errors.New("zkdriver: the ZooKeeper session ended")

// errConnClosed is the cause when the connection was closed (zk.Conn.Close).
var errConnClosed = fmt.Errorf("the ZooKeeper connection was closed (%w): %w", zk.ErrClosing, driver.ErrClosed)

// ConnOption returns a zk.Connect option that applies Dialer and OnEvent
// and ties the Session to the connection.
func (s *Session) ConnOption() func(*zk.Conn) {
	return func(c *zk.Conn) {
		s.mu.Lock()
		s.conn = c
		s.mu.Unlock()
		if s.Dialer != nil {
			zk.WithDialer(s.Dialer)(c)
		}
		if s.OnEvent != nil {
			zk.WithEventCallback(s.OnEvent)(c)
		}
	}
}

// bind ties s to conn for New, unless it follows another connection.
func (s *Session) bind(conn *zk.Conn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil && s.conn != conn {
		return errors.New("zkdriver: the Session's ConnOption was passed to another connection")
	}
	s.conn = conn
	return nil
}

// current returns the connection's current session, or nil.
func (s *Session) current() *zk.Session {
	s.mu.Lock()
	conn := s.conn
	s.mu.Unlock()
	if conn == nil {
		return nil
	}
	return conn.Session()
}

// Timeout returns the session timeout negotiated for the current session,
// or 0 before the first session was established.
func (s *Session) Timeout() time.Duration {
	if cur := s.current(); cur != nil {
		return cur.Timeout()
	}
	return 0
}

// ID returns the current session id, or 0 before the first session was
// established and after it expired until the next one is.
func (s *Session) ID() int64 {
	if cur := s.current(); cur != nil && cur.Context().Err() == nil {
		return cur.ID
	}
	return 0
}

// Wait waits until the connection has its first session, ctx is done, or
// the connection is closed (a permanent error).
func (s *Session) Wait(ctx context.Context) error {
	s.mu.Lock()
	conn := s.conn
	s.mu.Unlock()
	if conn == nil {
		return driver.Permanent(errors.New("zkdriver: the Session's ConnOption was not passed to zk.Connect"))
	}
	next := conn.NextSession()
	if conn.Session() != nil {
		return nil
	}
	select {
	case <-next:
		return nil
	case <-conn.Done():
		if conn.Session() != nil {
			return nil // established before the close
		}
		return driver.Permanent(fmt.Errorf("zkdriver: waiting for a ZooKeeper session: %w", errConnClosed))
	case <-ctx.Done():
		return fmt.Errorf("zkdriver: waiting for a ZooKeeper session: %w", ctx.Err())
	}
}

// state returns the connection's current session if its id is id, else
// nil: a node of another session is gone.
func (d *Driver) state(id int64) *zk.Session {
	if cur := d.conn.Session(); cur != nil && cur.ID == id {
		return cur
	}
	return nil
}

// live reports whether st is a session that is not over.
func live(st *zk.Session) bool { return st != nil && st.Context().Err() == nil }

// follow arranges for sessionEnded to run when st, in which the driver
// made a node, is over.
func (d *Driver) follow(st *zk.Session) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.followed == st || d.closed {
		return
	}
	d.followed = st
	ctx := st.Context()
	d.unfollow = context.AfterFunc(ctx, func() { d.sessionEnded(st.ID, context.Cause(ctx)) })
}
