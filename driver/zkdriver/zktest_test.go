package zkdriver_test

// The test of internal/zktest's CloseSession lives here, where a ZooKeeper
// client is a dependency anyway.

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker/internal/zktest"
	"github.com/go-zookeeper/zk"
)

func TestZKTestCloseSession(t *testing.T) {
	s := zktest.Shared(t)
	t.Cleanup(func() { _ = zktest.StopShared() })
	var sessions zktest.Sessions
	expired := make(chan struct{})
	var once sync.Once
	holder, _, err := zk.Connect([]string{s.Addr}, 4*time.Second, zk.WithDialer(sessions.Dial), zk.WithLogInfo(false),
		zk.WithLogger(zktestNop{}), zk.WithEventCallback(func(ev zk.Event) {
			if ev.State == zk.StateExpired {
				once.Do(func() { close(expired) })
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	admin, _, err := zk.Connect([]string{s.Addr}, 4*time.Second, zk.WithLogInfo(false), zk.WithLogger(zktestNop{}))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()

	path := "/zktest-close-session"
	if _, err := holder.Create(path, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	_, st, err := admin.Get(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.EphemeralOwner != holder.SessionID() {
		t.Fatalf("node owned by %#x, holder's session is %#x", st.EphemeralOwner, holder.SessionID())
	}
	passwd, ok := sessions.Password(st.EphemeralOwner)
	if !ok {
		t.Fatal("the holder's session was not recorded")
	}
	if err := zktest.CloseSession(s.Addr, st.EphemeralOwner, passwd); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := admin.Exists(path); err != nil || ok {
		t.Fatalf("after zktest.CloseSession: node exists %v, %v", ok, err)
	}
	select {
	case <-expired:
	case <-time.After(15 * time.Second):
		t.Fatal("the holder never learned that its session expired")
	}
	if err := zktest.CloseSession(s.Addr, st.EphemeralOwner, passwd); !errors.Is(err, zktest.ErrSessionGone) {
		t.Fatalf("second zktest.CloseSession = %v, want zktest.ErrSessionGone", err)
	}
}

type zktestNop struct{}

func (zktestNop) Printf(string, ...any) {}
