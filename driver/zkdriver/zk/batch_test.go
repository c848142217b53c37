package zk

import (
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker/internal/goleak"
	"github.com/go-locker/locker/internal/zktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recordingConn records the requests of each Write on a connection (after
// the connect request), and can hold a Write until released.
type recordingConn struct {
	net.Conn
	mu      sync.Mutex
	started bool
	writes  [][]int32 // opcodes of each Write's requests
	partial bool      // a Write did not end on a request's end
	hold    chan struct{}
	held    chan struct{} // closed when a Write is held
}

func (r *recordingConn) Write(b []byte) (int, error) {
	r.mu.Lock()
	if !r.started {
		r.started = true
		r.mu.Unlock()
		return r.Conn.Write(b)
	}
	var ops []int32
	p := b
	for len(p) >= 12 {
		ops = append(ops, int32(binary.BigEndian.Uint32(p[8:])))
		n := 4 + int(binary.BigEndian.Uint32(p))
		if n > len(p) {
			break
		}
		p = p[n:]
	}
	if len(p) != 0 {
		r.partial = true
	}
	r.writes = append(r.writes, ops)
	hold, held := r.hold, r.held
	r.hold = nil
	r.mu.Unlock()
	if hold != nil {
		close(held)
		<-hold
	}
	return r.Conn.Write(b)
}

// TestBatchedWrites checks sendBatch: the requests queued while the send
// loop is busy go out together, in one Write of whole requests, and each
// gets its own reply; a close request is written alone, first in its
// Write, as go-zookeeper writes it.
func TestBatchedWrites(t *testing.T) {
	srv := zktest.Standalone(t)
	var rc *recordingConn
	dial := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, addr, timeout)
		if err != nil {
			return nil, err
		}
		if rc != nil {
			return nil, fmt.Errorf("a second connection to %s", addr)
		}
		rc = &recordingConn{Conn: c}
		return rc, nil
	}
	c, events, err := Connect([]string{srv.Addr}, 30*time.Second, WithDialer(dial), WithLogger(nopLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			c.Close()
		}
	}()
	waitSession(t, events)

	const queued = 10
	writes := writeHeldBatch(t, c, rc, queued)
	checkBatch(t, writes, queued)

	c.Close()
	closed = true
	checkCloseAlone(t, rc)
}

// writeHeldBatch holds the send loop of c in the Write of one create and
// queues queued gets behind it, then lets it go; it returns the Writes
// (their opcodes) from the held one on.
func writeHeldBatch(t *testing.T, c *Conn, rc *recordingConn, queued int) [][]int32 {
	t.Helper()
	hold, held := make(chan struct{}), make(chan struct{})
	rc.mu.Lock()
	rc.hold, rc.held = hold, held
	first := len(rc.writes)
	rc.mu.Unlock()
	errs := make(chan error, queued+1)
	go func() {
		_, err := c.Create("/zk-batch-test", []byte("x"), FlagEphemeral, WorldACL(PermAll))
		errs <- err
	}()
	<-held
	for i := range queued {
		go func() {
			data, _, err := c.Get("/zk-batch-test")
			if err == nil && string(data) != "x" {
				err = fmt.Errorf("get %d: %q; want %q", i, data, "x")
			}
			errs <- err
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(c.sendChan) < queued {
		if time.Now().After(deadline) {
			close(hold)
			t.Fatalf("%d requests queued after 10s; want %d", len(c.sendChan), queued)
		}
		time.Sleep(time.Millisecond)
	}
	close(hold)
	for range queued + 1 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.writes[first:]
}

// checkBatch checks that the held Write carried the create alone and the
// next one (pings aside) the queued gets together.
func checkBatch(t *testing.T, writes [][]int32, queued int) {
	t.Helper()
	var batch []int32
	for _, w := range writes[1:] {
		if len(w) == 1 && w[0] == opPing {
			continue
		}
		batch = w
		break
	}
	if writes[0][0] != opCreate || len(writes[0]) != 1 {
		t.Errorf("held Write: opcodes %v; want one create", writes[0])
	}
	if len(batch) != queued {
		t.Errorf("Write after the held one: opcodes %v; want %d gets in one Write", batch, queued)
	}
	for _, op := range batch {
		if op != opGetData {
			t.Errorf("batched opcodes %v; want getData only", batch)
			break
		}
	}
}

// checkCloseAlone waits for the close request after Close and checks that
// it went alone in its Write and that no Write ended inside a request.
func checkCloseAlone(t *testing.T, rc *recordingConn) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rc.mu.Lock()
		writes, partial := rc.writes, rc.partial
		rc.mu.Unlock()
		if partial {
			t.Fatal("a Write ended inside a request")
		}
		for _, w := range writes {
			for i, op := range w {
				if op != opClose {
					continue
				}
				if i != 0 || len(w) != 1 {
					t.Fatalf("close request in a Write of opcodes %v; want it alone", w)
				}
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no close request written within 10s of Close")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitSession(t *testing.T, events <-chan Event) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == StateHasSession {
				return
			}
		case <-timeout:
			t.Fatal("no session within 30s")
		}
	}
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}
