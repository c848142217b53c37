package zk

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker/internal/zktest"
)

// TestSessionTracking checks Session and NextSession against the real
// server: the first session, a reconnection to the same session (same
// Session, not over, NextSession closed), an expiry (the old Session over
// with ErrSessionExpired, then a new one), and Close (ErrClosing).
func TestSessionTracking(t *testing.T) {
	srv := zktest.Standalone(t)
	var mu sync.Mutex
	var conns []net.Conn
	dial := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, addr, timeout)
		if err == nil {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
		return c, err
	}
	c, _, err := Connect([]string{srv.Addr}, 10*time.Second, WithLogger(nopLogger{}), WithDialer(dial))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	next := c.NextSession()
	waitClosed(t, next, "the first session")
	first := c.Session()
	if first == nil || first.ID != c.SessionID() || first.Timeout() != c.SessionTimeout() || first.Context().Err() != nil {
		t.Fatalf("first session %+v; SessionID %#x, SessionTimeout %v", first, c.SessionID(), c.SessionTimeout())
	}

	// A broken connection: the client reconnects to the same session.
	next = c.NextSession()
	mu.Lock()
	conns[len(conns)-1].Close()
	mu.Unlock()
	waitClosed(t, next, "the reconnection")
	if s := c.Session(); s != first || s.Context().Err() != nil {
		t.Fatalf("after a reconnection: session %+v (ended: %v); want the first one, live", s, s.Context().Err())
	}

	// The server ends the session: the client learns of the expiry when
	// it reconnects, then gets a new session.
	next = c.NextSession()
	if err := zktest.CloseSession(srv.Addr, first.ID, c.passwd); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, first.Context().Done(), "the expiry")
	if cause := context.Cause(first.Context()); !errors.Is(cause, ErrSessionExpired) {
		t.Fatalf("expired session's cause %v; want ErrSessionExpired", cause)
	}
	waitClosed(t, next, "a new session")
	second := c.Session()
	if second == first || second.ID == first.ID || second.Context().Err() != nil {
		t.Fatalf("after the expiry: session %+v; want a new live one (the first was %#x)", second, first.ID)
	}

	c.Close()
	waitClosed(t, second.Context().Done(), "the end of the session at Close")
	if cause := context.Cause(second.Context()); !errors.Is(cause, ErrClosing) {
		t.Fatalf("closed connection's session cause %v; want ErrClosing", cause)
	}
}

// waitClosed fails t unless ch is closed within 30s.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: not within 30s", what)
	}
}
