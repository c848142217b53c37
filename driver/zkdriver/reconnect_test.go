package zkdriver_test

import (
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/zkdriver"
	"github.com/go-locker/locker/internal/faultproxy"
	"github.com/go-locker/locker/internal/zktest"
	"github.com/go-zookeeper/zk"
)

// TestReconnectAtOnce resets a connection three times: each time the
// session is back within half a second (go-zookeeper alone waits a second
// before it tries its one server again), and a server that refuses
// connections is tried five times within 800 ms and then about once a
// second, not in a loop.
func TestReconnectAtOnce(t *testing.T) {
	parallelIfShort(t)
	srv := server(t)
	p := faultproxy.ForTest(t, srv.Addr)
	hasSession := make(chan struct{}, 16)
	var dials atomic.Int64
	sess := &zkdriver.Session{
		OnEvent: func(ev zk.Event) {
			if ev.Type == zk.EventSession && ev.State == zk.StateHasSession {
				hasSession <- struct{}{}
			}
		},
		Dialer: func(network, addr string, timeout time.Duration) (net.Conn, error) {
			dials.Add(1)
			return net.DialTimeout(network, addr, timeout)
		},
	}
	conn, _, err := zk.Connect([]string{p.Addr()}, 10*time.Second, quiet(t), zkdriver.ReconnectAtOnce(), sess.ConnOption())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	d, err := zkdriver.New(conn, sess, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := sess.Wait(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	<-hasSession
	id := sess.ID()
	l := mustAcquire(t, d, req(uniqueKey(t, "k"), owner(), 0, time.Second))
	for i := range 3 {
		p.Reset()
		start := time.Now()
		select {
		case <-hasSession:
		case <-time.After(5 * time.Second):
			t.Fatalf("reset %d: no session after 5s", i)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("reset %d: session back after %v, want at once", i, d)
		}
		if sess.ID() != id {
			t.Fatalf("reset %d: session %x, want %x", i, sess.ID(), id)
		}
	}
	if _, err := d.Refresh(ctxT(t), l); err != nil {
		t.Fatalf("Refresh after the resets: %v", err)
	}

	p.Partition(true) // new connections are refused
	p.Reset()
	before := dials.Load()
	time.Sleep(2500 * time.Millisecond)
	n := dials.Load() - before
	p.Heal()
	if n < 1 || n > 9 {
		t.Fatalf("%d dials in 2.5s while the server refused connections, want five within 800ms and then about one a second", n)
	}
}

// TestSessionClosedByAdmin closes the session of a holder as an
// administrator would (zktest.CloseSession): its node is gone at once, and
// the driver reports the loss once its client learns that the session
// expired. That takes one reconnection, or, when the client's
// reconnection races with the close in the server and its new connection
// stays attached to the closed session, the client's read timeout (two
// thirds of the session timeout); either way before the session timeout
// has passed.
func TestSessionClosedByAdmin(t *testing.T) {
	srv := server(t)
	admin := newDriver(t).Conn()
	for i := range 5 {
		d, closeFn, err := faultDial(srv.Addr)
		if err != nil {
			t.Fatal(err)
		}
		l := mustAcquire(t, d, req(uniqueKey(t, "k"), owner(), 0, faultTTL))
		lost := make(chan struct{})
		stop := d.(*zkdriver.Driver).WatchLoss(l, func(error) { close(lost) })
		id := d.(*zkdriver.Driver).Session().ID()
		passwd, ok := faultSessions.Password(id)
		if !ok {
			t.Fatal("session not recorded")
		}
		start := time.Now()
		if err := zktest.CloseSession(srv.Addr, id, passwd); err != nil {
			t.Fatal(err)
		}
		names, _, err := admin.Children(zkdriver.ParentPath(zkdriver.DefaultRoot, l.Key))
		if errors.Is(err, zk.ErrNoNode) {
			// ZooKeeper's container manager deleted the key's node, empty
			// since the close.
			names, err = nil, nil
		}
		if err != nil || len(zkdriver.LockNodes(names)) != 0 {
			t.Fatalf("%d: after CloseSession: nodes %v, %v", i, names, err)
		}
		select {
		case <-lost:
			t.Logf("%d: loss reported %v after the close", i, time.Since(start).Round(time.Millisecond))
		case <-time.After(faultSession):
			t.Fatalf("%d: no loss reported within the session timeout %v", i, faultSession)
		}
		if _, err := d.Refresh(ctxT(t), l); !errors.Is(err, driver.ErrNotHeld) {
			t.Fatalf("%d: Refresh after the close = %v, want ErrNotHeld", i, err)
		}
		stop()
		if err := closeFn(); err != nil {
			t.Fatal(err)
		}
	}
}
