package zktest

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

func TestStandalone(t *testing.T) {
	start := time.Now()
	s := PrivateStandalone(t)
	t.Logf("standalone server up in %v", time.Since(start))
	mode, err := s.Mode()
	if err != nil || mode != "standalone" {
		t.Fatalf("Mode() = %q, %v; want standalone", mode, err)
	}
	out, err := FourLetter(s.Addr, "ruok")
	if err != nil || out != "imok" {
		t.Fatalf("ruok = %q, %v", out, err)
	}
	pid := s.PID()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.PID() == pid || s.PID() == 0 {
		t.Fatalf("Restart: PID %d -> %d", pid, s.PID())
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Mode(); err == nil {
		t.Fatal("killed server still answers")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestEnsembleLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three JVMs")
	}
	start := time.Now()
	e := NewEnsemble(t, 3)
	t.Logf("ensemble up in %v", time.Since(start))
	l, err := e.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	followers := 0
	for _, s := range e.Servers {
		if m, err := s.Mode(); err == nil && m == "follower" {
			followers++
		}
	}
	if followers != 2 {
		t.Fatalf("%d followers; want 2", followers)
	}
	if err := l.Kill(); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	l2, err := e.Leader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l2 == l {
		t.Fatal("the killed server is still the leader")
	}
	t.Logf("new leader %d after %v", l2.ID, time.Since(start))
	if err := l.Restart(); err != nil {
		t.Fatal(err)
	}
	if m, err := l.Mode(); err != nil || m != "follower" {
		t.Fatalf("restarted old leader: mode %q, %v; want follower", m, err)
	}
	if !strings.Contains(strings.Join(e.Addrs(), ","), l.Addr) {
		t.Fatal("Addrs misses a server")
	}
}

func TestCloseSession(t *testing.T) {
	s := Shared(t)
	t.Cleanup(func() { _ = StopShared() })
	var sessions Sessions
	expired := make(chan struct{})
	var once sync.Once
	holder, _, err := zk.Connect([]string{s.Addr}, 4*time.Second, zk.WithDialer(sessions.Dial), zk.WithLogInfo(false),
		zk.WithLogger(zkNop{}), zk.WithEventCallback(func(ev zk.Event) {
			if ev.State == zk.StateExpired {
				once.Do(func() { close(expired) })
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	admin, _, err := zk.Connect([]string{s.Addr}, 4*time.Second, zk.WithLogInfo(false), zk.WithLogger(zkNop{}))
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
	if err := CloseSession(s.Addr, st.EphemeralOwner, passwd); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := admin.Exists(path); err != nil || ok {
		t.Fatalf("after CloseSession: node exists %v, %v", ok, err)
	}
	select {
	case <-expired:
	case <-time.After(15 * time.Second):
		t.Fatal("the holder never learned that its session expired")
	}
	if err := CloseSession(s.Addr, st.EphemeralOwner, passwd); !errors.Is(err, ErrSessionGone) {
		t.Fatalf("second CloseSession = %v, want ErrSessionGone", err)
	}
}

type zkNop struct{}

func (zkNop) Printf(string, ...any) {}
