package zkdriver_test

import (
	"testing"
	"time"

	"github.com/go-locker/locker/driver/zkdriver"
	"github.com/go-locker/locker/internal/zktest"
	"github.com/go-zookeeper/zk"
)

// TestSessionTimeoutNegotiated checks what the Session reads from the wire
// against the real server: the timeout the server granted within its
// bounds, the session id go-zookeeper reports, and the close.
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
		if err := sess.Wait(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if got := sess.Timeout(); got != c.want {
			t.Errorf("asked for %v: Session.Timeout = %v; want %v", c.asked, got, c.want)
		}
		if id := conn.SessionID(); id == 0 || sess.ID() != id {
			t.Errorf("SessionID = %#x, Session.ID = %#x; want the same, not 0", id, sess.ID())
		}
		if zkdriver.SessionClosed(sess) {
			t.Error("the Session sees the connection closed before Close")
		}
		conn.Close()
		if !zkdriver.SessionClosed(sess) {
			t.Error("the Session does not see the connection closed after Close")
		}
	}
}
