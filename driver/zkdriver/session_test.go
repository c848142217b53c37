package zkdriver_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/internal/faultproxy"

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

// TestPlainConnection runs the driver on a connection of upstream
// go-zookeeper made without a Session (as a service-discovery library
// makes one), with go-zookeeper's own options and a digest ACL: the
// driver refuses it without Options.SessionTimeout, errors.Is matches
// go-zookeeper's error values, a session expiry is reported to WatchLoss
// by the watch the driver keeps, and a closed connection makes every call
// fail permanently.
func TestPlainConnection(t *testing.T) {
	srv := server(t)
	const session = 1500 * time.Millisecond
	p := faultproxy.ForTest(t, srv.Addr)
	conn, _, err := zk.Connect([]string{p.Addr()}, session, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}), zkdriver.ReconnectAtOnce())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := zkdriver.New(conn, nil, nil); err == nil || !strings.Contains(err.Error(), "Options.SessionTimeout") {
		t.Fatalf("New without a Session nor Options.SessionTimeout: %v; want an error naming Options.SessionTimeout", err)
	}
	if err := conn.AddAuth("digest", []byte("plain:secret")); err != nil {
		t.Fatal(err)
	}
	root := "/plain-" + plainKey("root")
	d, err := zkdriver.New(conn, nil, &zkdriver.Options{Root: root, SessionTimeout: session, ACL: zk.DigestACL(zk.PermAll, "plain", "secret")})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Session().Wait(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if got := d.Capabilities().MaxTTL; got != session {
		t.Errorf("MaxTTL = %v; want the declared %v", got, session)
	}
	// Another tenant cannot take the key: go-zookeeper's ErrNoAuth.
	other := connect(t, []string{srv.Addr}, 10*time.Second, &zkdriver.Options{Root: root})
	r := req("k", owner(), driver.Exclusive, time.Second)
	l := mustAcquire(t, d, r)
	if _, err := other.TryAcquire(ctxT(t), req("k", owner(), driver.Exclusive, time.Second)); !errors.Is(err, zk.ErrNoAuth) || !driver.IsPermanent(err) {
		t.Errorf("other tenant's TryAcquire: %v; want a permanent error wrapping zk.ErrNoAuth", err)
	}
	lost := make(chan error, 1)
	stop := d.WatchLoss(l, func(err error) { lost <- err })
	defer stop()
	old := d.Session().ID()
	p.Partition(true)
	time.Sleep(2 * session) // the server expires the session
	p.Partition(false)
	checkNewSession(t, d, r, l, old, lost)
	conn.Close()
	waitFor(t, 10*time.Second, "the close seen", func() bool {
		_, err := d.TryAcquire(ctxT(t), req("k2", owner(), driver.Exclusive, time.Second))
		return driver.IsPermanent(err) && errors.Is(err, zk.ErrClosing)
	})
}

// TestSessionZxid checks the zxid a Session's connection keeps for
// go-zookeeper (see sniffConn): after a reconnection to the same session,
// a watch whose node changed while the connection was down fires, and one
// whose node did not change stays quiet, as when go-zookeeper keeps it.
func TestSessionZxid(t *testing.T) {
	srv := server(t)
	p := faultproxy.ForTest(t, srv.Addr)
	sess := new(zkdriver.Session)
	conn, _, err := zk.Connect([]string{p.Addr()}, 4*time.Second, quiet(t), zkdriver.ReconnectAtOnce(), sess.ConnOption())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := sess.Wait(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	other := newDriver(t).Conn()
	base := "/zxid-" + plainKey("watch")
	var paths [2]string
	var events [2]<-chan zk.Event
	for i := range paths {
		paths[i] = base + strconv.Itoa(i)
		if _, err := other.Create(paths[i], nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		if _, _, events[i], err = conn.GetW(paths[i]); err != nil {
			t.Fatal(err)
		}
	}
	id := conn.SessionID()
	p.Partition(true)
	if _, err := other.Set(paths[0], []byte("changed"), -1); err != nil {
		t.Fatal(err)
	}
	p.Reset() // the event held back by the partition is lost with the connection
	p.Partition(false)
	select {
	case ev := <-events[0]:
		if ev.Type != zk.EventNodeDataChanged || ev.Path != paths[0] {
			t.Errorf("event %+v; want %s's data changed", ev, paths[0])
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event for the node changed while disconnected")
	}
	select {
	case ev := <-events[1]:
		t.Errorf("event %+v for the node that did not change", ev)
	case <-time.After(300 * time.Millisecond):
	}
	if conn.SessionID() != id {
		t.Errorf("session %#x; want the same %#x", conn.SessionID(), id)
	}
}
