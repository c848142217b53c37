//go:build go1.25

package zkdriver_test

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-locker/locker/driver/zkdriver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/faultproxy"
	"github.com/go-zookeeper/zk"
)

// TestReconnectWithWatches resets a go-zookeeper connection made with a
// Session's ConnOption that holds many watches, again and again, while
// other goroutines keep requests flowing, and checks that the session and
// its watches survive every reconnect.
//
// It is also the regression test of the data race on the connection's last
// seen zxid in go-zookeeper v1.0.4, which the Session's connection avoids
// (see sniffConn): after a reconnect, the goroutine that re-sends the
// watches reads that zxid for each packet of watches it builds, while the
// new connection's receive loop already stores the zxid of the replies to
// the requests queued meanwhile. Many long watch paths make the watches
// span many packets, so that the two overlap on most reconnects; under
// -race a connection made without the Session fails this test.
func TestReconnectWithWatches(t *testing.T) {
	drivertest.Long(t, "resets a connection many times")
	srv := server(t)
	// Two proxies in front of the one server: go-zookeeper waits a second
	// before it dials again the server it was last connected to, but goes
	// on at once to the next one in its list.
	p1 := faultproxy.ForTest(t, srv.Addr)
	p2 := faultproxy.ForTest(t, srv.Addr)

	conn, waitSession := connectWatching(t, []string{p1.Addr(), p2.Addr()})
	waitSession("at the start")
	sid := conn.SessionID()

	// A node of our own, so that every reply carries a non-zero zxid, and
	// under it the paths of the watches (missing nodes: an exists watch on
	// each, plus data and child watches on the base node itself).
	base := fmt.Sprintf("/zkrace-%d-%d", time.Now().UnixNano(), sid)
	if _, err := conn.Create(base, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Delete(base, -1) }()
	_, _, dataCh, err := conn.GetW(base)
	if err != nil {
		t.Fatal(err)
	}
	_, _, childCh, err := conn.ChildrenW(base)
	if err != nil {
		t.Fatal(err)
	}
	const watches = 1500
	long := strings.Repeat("w", 700) // ~180 paths to a 128 KiB packet of watches
	watchPath := func(i int) string { return fmt.Sprintf("%s/%s-%04d", base, long, i) }
	watchCh := setWatches(t, conn, watches, watchPath)

	// Requests in flight throughout: some are queued while the connection
	// is down and sent as soon as the next one is up.
	resetUnderLoad(t, conn, base, func() {
		p1.Reset()
		p2.Reset()
		waitSession("after a reset")
	})
	if got := conn.SessionID(); got != sid {
		t.Fatalf("session changed across the resets: %x, then %x", sid, got)
	}

	// The watches were set again after every reconnect: creating a watched
	// node fires its exists watch and the base node's child watch, and
	// writing the base node fires its data watch.
	probe := watches / 2
	if _, err := conn.Create(watchPath(probe), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Delete(watchPath(probe), -1) }()
	if _, err := conn.Set(base, []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	checkFired(t, []watchWant{
		{watchCh[probe], zk.EventNodeCreated, watchPath(probe)},
		{childCh, zk.EventNodeChildrenChanged, base},
		{dataCh, zk.EventNodeDataChanged, base},
	})
}

// connectWatching connects to servers, for a test, and returns the
// connection (closed at the test's cleanup) and a function that waits up
// to 20s for its next session event (the start, or a reconnect).
func connectWatching(t *testing.T, servers []string) (*zk.Conn, func(what string)) {
	t.Helper()
	connected := make(chan struct{}, 1)
	conn, events, err := zk.Connect(servers, 10*time.Second, quiet(t), new(zkdriver.Session).ConnOption())
	if err != nil {
		t.Fatal(err)
	}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for ev := range events {
			if ev.Type == zk.EventSession && ev.State == zk.StateHasSession {
				select {
				case connected <- struct{}{}:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() {
		conn.Close()
		<-drained
	})
	waitSession := func(what string) {
		t.Helper()
		select {
		case <-connected:
		case <-time.After(20 * time.Second):
			t.Fatalf("no session %s", what)
		}
	}
	return conn, waitSession
}

// A watchWant is a watch expected to fire: its channel, and the event's
// type and path.
type watchWant struct {
	ch   <-chan zk.Event
	typ  zk.EventType
	path string
}

// checkFired checks that each watch of ws fires as expected within 10s.
func checkFired(t *testing.T, ws []watchWant) {
	t.Helper()
	for _, w := range ws {
		select {
		case ev := <-w.ch:
			if ev.Type != w.typ || ev.Path != w.path {
				t.Fatalf("watch fired %v on %.40q…, want %v on %.40q…", ev.Type, ev.Path, w.typ, w.path)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the %v watch on %.40q… did not survive the reconnects", w.typ, w.path)
		}
	}
}

// setWatches sets an exists watch on each of n missing nodes
// watchPath(0…n-1) through conn, from 8 goroutines, and returns their
// channels.
func setWatches(t *testing.T, conn *zk.Conn, n int, watchPath func(int) string) []<-chan zk.Event {
	t.Helper()
	watchCh := make([]<-chan zk.Event, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	const setters = 8
	for g := range setters {
		wg.Go(func() {
			for i := g; i < n; i += setters {
				ok, _, ch, err := conn.ExistsW(watchPath(i))
				if err != nil || ok {
					errs <- fmt.Errorf("ExistsW(#%d) = %v, %v", i, ok, err)
					return
				}
				watchCh[i] = ch
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return watchCh
}

// resetUnderLoad resets conn's connection 25 times with reset (which
// waits for the session), while 4 goroutines read base through conn, and
// checks that reads went through.
func resetUnderLoad(t *testing.T, conn *zk.Conn, base string, reset func()) {
	t.Helper()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var ok, failed atomic.Int64
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, _, err := conn.Get(base); err != nil {
					failed.Add(1)
					if !transient(err) {
						t.Errorf("Get(base): %v", err)
						return
					}
					time.Sleep(time.Millisecond)
					continue
				}
				ok.Add(1)
			}
		})
	}
	const resets = 25
	for range resets {
		time.Sleep(20 * time.Millisecond) // let some requests through
		reset()
	}
	close(stop)
	wg.Wait()
	if ok.Load() == 0 {
		t.Fatal("no request succeeded during the resets")
	}
	t.Logf("%d resets; %d requests succeeded, %d failed on a reset connection", resets, ok.Load(), failed.Load())
}

// transient reports whether err is what a request can get while its
// connection is reset: the connection's failure, seen by go-zookeeper or
// by the socket.
func transient(err error) bool {
	var ne net.Error
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrClosing) || errors.As(err, &ne)
}
