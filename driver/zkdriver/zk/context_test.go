package zk

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker/internal/zktest"
)

// gatedConn holds every Write while its gate is shut.
type gatedConn struct {
	net.Conn
	gate *sync.RWMutex
}

func (c gatedConn) Write(b []byte) (int, error) {
	c.gate.RLock()
	defer c.gate.RUnlock()
	return c.Conn.Write(b)
}

// TestRequestContext checks the Context methods: a done context fails at
// once; a request that gets no answer returns its context's error by the
// deadline, leaving the request queued, and the connection serves it and
// the next requests once it can write again; without a deadline they are
// the plain methods.
func TestRequestContext(t *testing.T) {
	srv := zktest.Standalone(t)
	var gate sync.RWMutex
	dial := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, addr, timeout)
		if err != nil {
			return nil, err
		}
		return gatedConn{c, &gate}, nil
	}
	c, events, err := Connect([]string{srv.Addr}, 30*time.Second, WithLogger(nopLogger{}), WithDialer(dial))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitSession(t, events)
	const path = "/zk-context-test"
	if _, err := c.Create(path, []byte("v1"), 0, WorldACL(PermAll)); err != nil && !errors.Is(err, ErrNodeExists) {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := c.GetContext(done, path); !errors.Is(err, context.Canceled) {
		t.Fatalf("GetContext with a done context: %v; want context.Canceled", err)
	}

	gate.Lock() // the next Write blocks: the request gets no answer
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.SetContext(ctx, path, []byte("v2"), -1)
	took := time.Since(start)
	gate.Unlock()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("SetContext with no answer: %v; want context.DeadlineExceeded", err)
	}
	if took > 5*time.Second {
		t.Fatalf("SetContext returned %v after its 200ms deadline", took)
	}

	// The abandoned Set is still sent, before the Get queued after it.
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	data, st, err := c.GetContext(ctx, path)
	if err != nil || string(data) != "v2" || st.Version != 1 {
		t.Fatalf("GetContext after the abandoned Set: %q, %+v, %v; want \"v2\" at version 1", data, st, err)
	}
	if err := c.DeleteContext(ctx, path, st.Version); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Get(path); !errors.Is(err, ErrNoNode) {
		t.Fatalf("Get after DeleteContext: %v; want ErrNoNode", err)
	}
}

// TestDeleteContextAbandoned checks DeleteContext, which zkdriver's
// Release sends with a context that can end: a delete answered returns its
// result, one whose context ended first returns the context's error and
// still deletes the node, and a context done before the call sends
// nothing. Run with -race, it checks that an abandoned reply is handed
// over cleanly.
func TestDeleteContextAbandoned(t *testing.T) {
	conn := connectTest(t, zktest.Standalone(t))
	root := fmt.Sprintf("/del-test-%d", time.Now().UnixNano())
	if _, err := conn.Create(root, nil, 0, WorldACL(PermAll)); err != nil {
		t.Fatal(err)
	}
	const n = 200
	paths := make([]string, n)
	for i := range paths {
		paths[i] = fmt.Sprintf("%s/%d", root, i)
		if _, err := conn.Create(paths[i], nil, FlagEphemeral, WorldACL(PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[string]int{}
	for i, p := range paths {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			if i%2 == 0 {
				// Cancel when the server has applied the delete (its
				// watch fires): the cancellation races with the reply,
				// never with the send. (A context done before the call
				// sends nothing, as checked below; a plain "go cancel()"
				// sometimes came first on a loaded machine, and its node
				// stayed.)
				_, _, applied, err := conn.ExistsW(p)
				if err != nil {
					t.Error(err)
					cancel()
					return
				}
				go func() {
					<-applied
					cancel()
				}()
			}
			err := conn.DeleteContext(ctx, p, -1)
			cancel()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				outcomes["answered"]++
			case errors.Is(err, context.Canceled):
				outcomes["abandoned"]++
			default:
				t.Errorf("delete %s: %v", p, err)
			}
		})
	}
	wg.Wait()
	t.Logf("outcomes: %v", outcomes)
	if outcomes["answered"] < n/2 {
		t.Errorf("%d deletes answered; want at least the %d whose context was never cancelled", outcomes["answered"], n/2)
	}
	// Every node goes, abandoned deletes included.
	waitNoChildren(t, conn, root, 10*time.Second)
	checkDeleteContextEdges(t, conn, root)
}

// waitNoChildren waits up to within for root to have no children.
func waitNoChildren(t *testing.T, conn *Conn, root string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		kids, _, err := conn.Children(root)
		if err != nil {
			t.Fatal(err)
		}
		if len(kids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d nodes left after their deletes: %v", len(kids), kids)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkDeleteContextEdges is TestDeleteContextAbandoned's check of DeleteContext with a context done
// before the call (nothing is sent) and with one that cannot end (the
// delete runs on the caller's goroutine, its errors as they are), below
// root.
func checkDeleteContextEdges(t *testing.T, conn *Conn, root string) {
	t.Helper()
	// A context done before the call: nothing is sent.
	p := root + "/kept"
	if _, err := conn.Create(p, nil, FlagEphemeral, WorldACL(PermAll)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := conn.DeleteContext(ctx, p, -1); !errors.Is(err, context.Canceled) {
		t.Fatalf("delete with a done context: %v; want context.Canceled", err)
	}
	if ok, _, err := conn.Exists(p); err != nil || !ok {
		t.Fatalf("node deleted by a call whose context was done before it: exists %v, %v", ok, err)
	}
	// Without a context that can end, the delete runs on the caller's
	// goroutine; its errors come back as they are.
	if err := conn.DeleteContext(context.Background(), root+"/none", -1); !errors.Is(err, ErrNoNode) {
		t.Fatalf("delete of a missing node: %v; want ErrNoNode", err)
	}
}
