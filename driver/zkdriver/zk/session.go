package zk

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// SessionTimeout returns the session timeout the server negotiated for the
// current session or, before the first session, the one passed to Connect.
func (c *Conn) SessionTimeout() time.Duration {
	return time.Duration(atomic.LoadInt32(&c.sessionTimeoutMs)) * time.Millisecond
}

// Done returns a channel that is closed when Close is called.
func (c *Conn) Done() <-chan struct{} {
	return c.shouldQuit
}

// A Session is one ZooKeeper session of a Conn: its id, the timeout the
// server negotiated for it, and a context that ends with it.
type Session struct {
	ID      int64
	timeout atomic.Int64 // negotiated again at each reconnection
	ctx     context.Context
	cancel  context.CancelCauseFunc
}

// Timeout returns the session timeout the server negotiated, at the last
// connection to the session.
func (s *Session) Timeout() time.Duration { return time.Duration(s.timeout.Load()) }

// Context returns a context that is done once the session is over: with
// cause ErrSessionExpired when the server said it expired or the Conn got
// a new session, ErrClosing when the Conn was closed. Its ephemeral nodes
// are gone then (or go with the close request).
func (s *Session) Context() context.Context { return s.ctx }

// sessions tracks a Conn's sessions; its zero value has seen none.
type sessions struct {
	mu   sync.Mutex
	cur  *Session
	next chan struct{} // closed at the next session established
}

// Session returns the Conn's current session, or nil before the first one
// was established. After an expiry it returns the expired session until
// the next one is established.
func (c *Conn) Session() *Session {
	c.sessions.mu.Lock()
	defer c.sessions.mu.Unlock()
	return c.sessions.cur
}

// NextSession returns a channel closed the next time the Conn establishes
// a session: its first one, a new one after an expiry, or the same one
// again after a reconnection (which may have lost watches).
func (c *Conn) NextSession() <-chan struct{} {
	s := &c.sessions
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next == nil {
		s.next = make(chan struct{})
	}
	return s.next
}

// sessionEstablished records the session the server granted in answer to
// a connect request; a session it replaces is over.
func (c *Conn) sessionEstablished(id int64, timeout time.Duration) {
	s := &c.sessions
	s.mu.Lock()
	old := s.cur
	if old == nil || old.ID != id {
		ctx, cancel := context.WithCancelCause(context.Background())
		s.cur = &Session{ID: id, ctx: ctx, cancel: cancel}
	}
	s.cur.timeout.Store(int64(timeout))
	if s.next != nil {
		close(s.next)
		s.next = nil
	}
	s.mu.Unlock()
	if old != nil && old.ID != id {
		old.cancel(ErrSessionExpired)
	}
}

// endSession ends the current session, if any, with cause.
func (c *Conn) endSession(cause error) {
	if cur := c.Session(); cur != nil {
		cur.cancel(cause)
	}
}
