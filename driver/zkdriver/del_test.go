package zkdriver_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker/driver/zkdriver"
	"github.com/go-locker/locker/driver/zkdriver/zk"
)

// TestDelAbandoned checks the pooled deletes that Release sends with a
// context that can end: a delete answered returns its result, one whose
// context ended first returns the context's error and still deletes the
// node, and a context done before the call sends nothing. Run with -race,
// it checks that the pooled deletions are handed over cleanly.
func TestDelAbandoned(t *testing.T) {
	d := newDriver(t)
	conn := d.Conn()
	root := fmt.Sprintf("/del-test-%d", time.Now().UnixNano())
	if _, err := conn.Create(root, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	const n = 200
	paths := make([]string, n)
	for i := range paths {
		paths[i] = fmt.Sprintf("%s/%d", root, i)
		if _, err := conn.Create(paths[i], nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
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
			err := zkdriver.Del(ctx, conn, p, -1)
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
	checkDelEdges(t, conn, root)
}

// waitNoChildren waits up to within for root to have no children.
func waitNoChildren(t *testing.T, conn *zk.Conn, root string, within time.Duration) {
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

// checkDelEdges is TestDelAbandoned's check of Del with a context done
// before the call (nothing is sent) and with one that cannot end (the
// delete runs on the caller's goroutine, its errors as they are), below
// root.
func checkDelEdges(t *testing.T, conn *zk.Conn, root string) {
	t.Helper()
	// A context done before the call: nothing is sent.
	p := root + "/kept"
	if _, err := conn.Create(p, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := zkdriver.Del(ctx, conn, p, -1); !errors.Is(err, context.Canceled) {
		t.Fatalf("delete with a done context: %v; want context.Canceled", err)
	}
	if ok, _, err := conn.Exists(p); err != nil || !ok {
		t.Fatalf("node deleted by a call whose context was done before it: exists %v, %v", ok, err)
	}
	// Without a context that can end, the delete runs on the caller's
	// goroutine; its errors come back as they are.
	if err := zkdriver.Del(context.Background(), conn, root+"/none", -1); !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("delete of a missing node: %v; want zk.ErrNoNode", err)
	}
}
