package zk

import (
	"errors"
	"testing"
	"time"

	"github.com/go-locker/locker/internal/zktest"
)

// connectTest connects to srv with a session of its own, closed when t ends.
func connectTest(t *testing.T, srv *zktest.Server) *Conn {
	t.Helper()
	c, events, err := Connect([]string{srv.Addr}, 30*time.Second, WithLogger(nopLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	waitSession(t, events)
	return c
}

// TestLockExcludesInOrder checks Lock over three sessions: the first
// holds it (creating the missing parents of its path); the others wait,
// each on its own node, until the holder before them unlocks, and acquire
// it in the order they asked for it.
func TestLockExcludesInOrder(t *testing.T) {
	srv := zktest.Standalone(t)
	const path = "/zk-lock-test/a/b"
	locks := make([]*Lock, 3)
	for i := range locks {
		locks[i] = NewLock(connectTest(t, srv), path, WorldACL(PermAll))
	}
	if err := locks[0].LockWithData([]byte("holder 0")); err != nil {
		t.Fatalf("lock 0: %v", err)
	}
	if err := locks[0].Lock(); !errors.Is(err, ErrDeadlock) {
		t.Fatalf("lock 0 again: %v; want ErrDeadlock", err)
	}
	data, _, err := locks[0].c.Get(locks[0].lockPath)
	if err != nil || string(data) != "holder 0" {
		t.Fatalf("lock 0's node %s: %q, %v; want %q", locks[0].lockPath, data, err, "holder 0")
	}

	acquired := make(chan int, 2)
	errs := make(chan error, 2)
	for i := 1; i < 3; i++ {
		go func() {
			if err := locks[i].Lock(); err != nil {
				errs <- err
				return
			}
			acquired <- i
		}()
		// Lock i waits before lock i+1 asks: its node is there.
		waitChildren(t, locks[0].c, path, i+1)
	}

	for holder := 0; holder < 2; holder++ {
		select {
		case i := <-acquired:
			t.Fatalf("lock %d acquired while lock %d holds it", i, holder)
		case err := <-errs:
			t.Fatal(err)
		default:
		}
		if err := locks[holder].Unlock(); err != nil {
			t.Fatalf("unlock %d: %v", holder, err)
		}
		select {
		case i := <-acquired:
			if i != holder+1 {
				t.Fatalf("lock %d acquired after lock %d unlocked; want lock %d", i, holder, holder+1)
			}
		case err := <-errs:
			t.Fatal(err)
		case <-time.After(30 * time.Second):
			t.Fatalf("lock %d not acquired 30s after lock %d unlocked", holder+1, holder)
		}
	}
	if err := locks[2].Unlock(); err != nil {
		t.Fatalf("unlock 2: %v", err)
	}
	if err := locks[2].Unlock(); !errors.Is(err, ErrNotLocked) {
		t.Fatalf("unlock 2 again: %v; want ErrNotLocked", err)
	}
	children, _, err := locks[0].c.Children(path)
	if err != nil || len(children) != 0 {
		t.Fatalf("children of %s after the last unlock: %q, %v; want none", path, children, err)
	}
}

// waitChildren waits until path has n children.
func waitChildren(t *testing.T, c *Conn, path string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		children, _, err := c.Children(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(children) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d children after 30s; want %d", path, len(children), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestLowestAndPrevious(t *testing.T) {
	children := []string{"_c_1-lock-0000000007", "_c_2-lock-0000000003", "_c_3-lock-0000000005", "_c_4-lock-0000000009"}
	for _, tc := range []struct {
		seq, lowest int
		prev        string
	}{
		{3, 3, ""},
		{5, 3, "_c_2-lock-0000000003"},
		{7, 3, "_c_3-lock-0000000005"},
		{9, 3, "_c_1-lock-0000000007"},
	} {
		lowest, prev, err := lowestAndPrevious(children, tc.seq)
		if err != nil || lowest != tc.lowest || prev != tc.prev {
			t.Errorf("lowestAndPrevious(seq %d) = %d, %q, %v; want %d, %q, nil", tc.seq, lowest, prev, err, tc.lowest, tc.prev)
		}
	}
	if _, _, err := lowestAndPrevious([]string{"not-a-sequence"}, 1); err == nil {
		t.Error("lowestAndPrevious of a child without a sequence number: no error")
	}
}
