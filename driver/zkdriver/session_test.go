package zkdriver_test

import (
	"testing"
	"time"

	"github.com/go-locker/locker/driver/zkdriver"
	"github.com/go-locker/locker/driver/zkdriver/zk"
	"github.com/go-locker/locker/internal/zktest"
)

// TestSessionTimeoutNegotiated checks zk.Conn's SessionTimeout and Done,
// which the Session reads, against the real server: before the first
// session SessionTimeout is the timeout asked for, after it the one the
// server granted within its bounds, and Done is closed by Close.
func TestSessionTimeoutNegotiated(t *testing.T) {
	for _, c := range []struct{ asked, want time.Duration }{
		{2 * zktest.MaxSessionTimeout, zktest.MaxSessionTimeout},
		{zktest.MinSessionTimeout / 2, zktest.MinSessionTimeout},
		{3 * time.Second, 3 * time.Second},
	} {
		sess := new(zkdriver.Session)
		conn, _, err := zk.Connect([]string{server(t).Addr}, c.asked, sess.ConnOption(), quiet(t))
		if err != nil {
			t.Fatal(err)
		}
		if got := conn.SessionTimeout(); conn.SessionID() == 0 && got != c.asked {
			t.Errorf("asked for %v: SessionTimeout before the session = %v", c.asked, got)
		}
		if err := sess.Wait(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if got := conn.SessionTimeout(); got != c.want || sess.Timeout() != c.want {
			t.Errorf("asked for %v: SessionTimeout = %v, Session.Timeout = %v; want %v", c.asked, got, sess.Timeout(), c.want)
		}
		if id := conn.SessionID(); id == 0 || sess.ID() != id {
			t.Errorf("SessionID = %#x, Session.ID = %#x; want the same, not 0", id, sess.ID())
		}
		select {
		case <-conn.Done():
			t.Error("Done is closed before Close")
		default:
		}
		conn.Close()
		select {
		case <-conn.Done():
		default:
			t.Error("Done is not closed after Close")
		}
	}
}
