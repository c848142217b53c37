// Package etcdtest starts embedded etcd servers for tests.
//
// The servers run in the test process (go.etcd.io/etcd/server/v3/embed),
// so no etcd binary is needed and the tests that use them never skip. Each
// member listens on free loopback ports and keeps its data in a temporary
// directory of its own, with fsync on as in production.
//
// [Start] and [StartCluster] start a one-member server or an n-member
// cluster for the duration of a test and close it at the test's cleanup;
// [StartServer] and [NewCluster] are the variants for TestMain, where no
// testing.TB exists. Members can be stopped gracefully ([Member.Stop]),
// killed as by a crash ([Member.Kill]: the Raft node stops at once and, in
// a cluster, every client connection is reset, through a TCP proxy in front
// of each member's client port) and restarted on the same ports and data
// ([Member.Restart]); [Cluster.Leader] finds the current leader.
//
// [StartChild] runs a one-member server in a process of its own (the test
// binary, run again; its TestMain must call [ServeChild] first): for
// benchmarks that must not count the server's CPU and allocations, and for
// fault tests that pause (SIGSTOP), kill (SIGKILL) and restart the server
// on the same ports and data.
//
// Timing: the members tick every 10 ms (a one-member server) or 20 ms (a
// cluster) with an election timeout of 100 ms or 300 ms, so that elections
// take a fraction of a second. etcd's minimum lease TTL is 1.5 election
// timeouts rounded up to whole seconds: 1 s for both (2 s with etcd's
// defaults).
//
// Logging of the servers and of the clients made by [NewClient] is off;
// set LOCKER_ETCD_LOG=1 to see the servers' warnings and errors.
//
// Goroutines: a closed member or client leaves none behind (this package's
// tests check it with goleak); [IgnoreGoroutines] is where exceptions would
// be listed.
package etcdtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker/internal/faultproxy"
	"github.com/go-locker/locker/internal/proc"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// EnvLog, set to "1", makes the servers log warnings and errors to stderr.
const EnvLog = "LOCKER_ETCD_LOG"

// startTimeout bounds how long a member may take to become ready.
const startTimeout = 30 * time.Second

// Member is one embedded etcd server.
type Member struct {
	// Name is the member's name in its cluster.
	Name string
	// ClientURL is the URL clients connect to (http://127.0.0.1:port).
	// For a member of a cluster of several, it is a TCP proxy in front of
	// the member's own client port, so that Kill can cut clients off as a
	// crash would; a one-member server is reached directly, without the
	// proxy's cost.
	ClientURL string
	// PeerURL is the URL other members connect to.
	PeerURL string

	dir     string
	own     string // the member's own client address (host:port)
	proxied bool   // ClientURL is a proxy in front of own
	proxy   *faultproxy.Proxy
	cluster string // the initial-cluster string
	state   string // initial-cluster-state
	tickMs  uint
	elecMs  uint
	ownDir  bool

	mu sync.Mutex
	e  *embed.Etcd // nil while stopped
}

// Cluster is a set of embedded etcd members that form one cluster.
type Cluster struct {
	Members []*Member
}

// Start starts a one-member etcd server for the duration of tb, in a
// temporary directory of tb's, and closes it at tb's cleanup.
func Start(tb testing.TB) *Member {
	tb.Helper()
	c := StartCluster(tb, 1)
	return c.Members[0]
}

// StartServer starts a one-member etcd server in a temporary directory of
// its own, which Close removes. It is Start for TestMain.
func StartServer() (*Member, error) {
	c, err := NewCluster(1)
	if err != nil {
		return nil, err
	}
	return c.Members[0], nil
}

// StartCluster starts an n-member cluster for the duration of tb and
// closes it at tb's cleanup.
func StartCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	return proc.ForTest(tb, "etcdtest", func() (*Cluster, error) { return NewCluster(n) }, nil)
}

// NewCluster starts an n-member cluster, each member in a temporary
// directory of its own, and waits until every member is ready. Close
// stops the members and removes their directories.
func NewCluster(n int) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("cluster of %d members", n)
	}
	var lastErr error
	for range 3 { // free ports can be taken by someone else before we bind them
		c, err := newCluster(n)
		if err == nil {
			return c, nil
		}
		lastErr = err
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, lastErr
}

func newCluster(n int) (*Cluster, error) {
	ports, err := proc.FreePorts(3 * n)
	if err != nil {
		return nil, err
	}
	tick, elec := uint(10), uint(100)
	if n > 1 {
		tick, elec = 20, 300
	}
	c := &Cluster{}
	var initial []string
	for i := range n {
		m := &Member{
			Name:      fmt.Sprintf("m%d", i),
			ClientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[3*i+2]),
			own:       fmt.Sprintf("127.0.0.1:%d", ports[3*i]),
			proxied:   n > 1,
			PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[3*i+1]),
			state:     embed.ClusterStateFlagNew,
			tickMs:    tick,
			elecMs:    elec,
			ownDir:    true,
		}
		if !m.proxied {
			m.ClientURL = "http://" + m.own
		}
		dir, err := os.MkdirTemp("", "etcdtest-"+m.Name+"-")
		if err != nil {
			c.Close()
			return nil, err
		}
		m.dir = dir
		c.Members = append(c.Members, m)
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	for _, m := range c.Members {
		m.cluster = strings.Join(initial, ",")
	}
	// Members of a new cluster wait for each other: start them all, then
	// wait for all.
	errc := make(chan error, n)
	for _, m := range c.Members {
		go func() { errc <- m.start() }()
	}
	var errs []error
	for range n {
		if err := <-errc; err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, err
	}
	for _, m := range c.Members {
		m.state = embed.ClusterStateFlagExisting // restarts rejoin
	}
	return c, nil
}

func (m *Member) config() (*embed.Config, error) {
	cfg := embed.NewConfig()
	cfg.Name = m.Name
	cfg.Dir = filepath.Join(m.dir, "data")
	cu, err := url.Parse("http://" + m.own)
	if err != nil {
		return nil, err
	}
	pu, err := url.Parse(m.PeerURL)
	if err != nil {
		return nil, err
	}
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = m.cluster
	cfg.InitialClusterToken = "etcdtest"
	cfg.ClusterState = m.state
	cfg.TickMs = m.tickMs
	cfg.ElectionMs = m.elecMs
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(serverLogger())
	cfg.Logger = "zap"
	return cfg, nil
}

// serverLogger returns the servers' logger: none, or warnings and errors
// to stderr with EnvLog=1.
func serverLogger() *zap.Logger {
	if os.Getenv(EnvLog) != "1" {
		return zap.NewNop()
	}
	zc := zap.NewDevelopmentConfig()
	zc.Level = zap.NewAtomicLevelAt(zapcore.WarnLevel)
	lg, err := zc.Build()
	if err != nil {
		return zap.NewNop()
	}
	return lg
}

// start starts the member and waits until it is ready.
func (m *Member) start() error {
	cfg, err := m.config()
	if err != nil {
		return err
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("starting etcd member %s: %w", m.Name, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("etcd member %s: %w", m.Name, err)
	case <-time.After(startTimeout):
		e.Server.Stop()
		e.Close()
		return fmt.Errorf("etcd member %s not ready within %v", m.Name, startTimeout)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.e = e
	if m.proxied && m.proxy == nil {
		p, err := faultproxy.NewAt(strings.TrimPrefix(m.ClientURL, "http://"), m.own)
		if err != nil {
			m.e = nil
			e.Close()
			return fmt.Errorf("etcd member %s: client proxy: %w", m.Name, err)
		}
		m.proxy = p
	}
	return nil
}

// Endpoints returns the client URLs of every member.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.Members))
	for i, m := range c.Members {
		eps[i] = m.ClientURL
	}
	return eps
}

// Client returns a new client of every member, closed at tb's cleanup.
func (c *Cluster) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	return NewClient(tb, c.Endpoints()...)
}

// Client returns a new client of m, closed at tb's cleanup.
func (m *Member) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	return NewClient(tb, m.ClientURL)
}

// NewClient returns a new client of the given endpoints, with logging
// off, closed at tb's cleanup.
func NewClient(tb testing.TB, endpoints ...string) *clientv3.Client {
	tb.Helper()
	c, err := clientv3.New(ClientConfig(endpoints...))
	if err != nil {
		tb.Fatalf("etcdtest: new client: %v", err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// ClientConfig returns the configuration NewClient uses.
func ClientConfig(endpoints ...string) clientv3.Config {
	return clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	}
}

// Running reports whether m is running.
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.e != nil
}

// Etcd returns the running embedded server, or nil.
func (m *Member) Etcd() *embed.Etcd {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.e
}

// IsLeader reports whether m is running and is its cluster's leader.
func (m *Member) IsLeader() bool {
	e := m.Etcd()
	return e != nil && e.Server.Leader() == e.Server.MemberID()
}

// Stop stops m gracefully (a leader hands its leadership over first),
// keeping its data; Restart starts it again. Client connections are
// reset first, so that the server need not wait for their streams to
// end.
func (m *Member) Stop() { m.halt(false) }

// Kill stops m as a crash would: its Raft node stops at once, without
// handing leadership over, and (for a member of a cluster of several)
// every client connection to it is reset. Its data stays; Restart starts
// it again.
func (m *Member) Kill() { m.halt(true) }

// halt closes m's client proxy and stops its server, at once (hard) or
// gracefully.
func (m *Member) halt(hard bool) {
	m.mu.Lock()
	e, p := m.e, m.proxy
	m.e, m.proxy = nil, nil
	m.mu.Unlock()
	if p != nil {
		_ = p.Close()
	}
	if e == nil {
		return
	}
	if hard {
		e.Server.HardStop()
	}
	e.Close()
}

// Restart starts a stopped member again on the same ports and data, and
// waits until it is ready (which, in a cluster, needs a quorum).
func (m *Member) Restart() error {
	if m.Running() {
		return fmt.Errorf("etcd member %s is running", m.Name)
	}
	return m.start()
}

// Close stops m and removes its directory.
func (m *Member) Close() error {
	m.Stop()
	if m.ownDir && m.dir != "" {
		return os.RemoveAll(m.dir)
	}
	return nil
}

// Close stops every member and removes their directories.
func (c *Cluster) Close() error {
	var wg sync.WaitGroup
	errs := make([]error, len(c.Members))
	for i, m := range c.Members {
		wg.Go(func() { errs[i] = m.Close() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Leader returns the index of the current leader among the running
// members, waiting up to timeout for one to be elected and known to all
// running members.
func (c *Cluster) Leader(timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		leader, agreed := -1, true
		var id uint64
		for i, m := range c.Members {
			e := m.Etcd()
			if e == nil {
				continue
			}
			l := uint64(e.Server.Leader())
			switch {
			case l == 0:
				agreed = false
			case id == 0:
				id = l
			case id != l:
				agreed = false
			}
			if uint64(e.Server.MemberID()) == l {
				leader = i
			}
		}
		if agreed && leader >= 0 {
			return leader, nil
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("no leader agreed on within %v", timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WaitReady waits until a linearizable read through a client of every
// running member succeeds, or ctx ends.
func (c *Cluster) WaitReady(ctx context.Context, cli *clientv3.Client) error {
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := cli.Get(rctx, "etcdtest-ready")
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster not ready: %w", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// RevokeOldest revokes, as an administrator would, the lease of the key
// under prefix with the lowest create revision, through cli: for a lock
// whose entries are the keys under prefix in the order of their creation,
// the lease of its holder. It returns the lease's ID, or an error when no
// key under prefix has a lease.
func RevokeOldest(ctx context.Context, cli *clientv3.Client, prefix string) (clientv3.LeaseID, error) {
	r, err := cli.Get(ctx, prefix, clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
	if err != nil {
		return 0, fmt.Errorf("etcdtest: RevokeOldest: %w", err)
	}
	if len(r.Kvs) == 0 || r.Kvs[0].Lease == 0 {
		return 0, fmt.Errorf("etcdtest: RevokeOldest: no key with a lease under %q", prefix)
	}
	id := clientv3.LeaseID(r.Kvs[0].Lease)
	if _, err := cli.Revoke(ctx, id); err != nil {
		return 0, fmt.Errorf("etcdtest: RevokeOldest: revoking lease %x: %w", id, err)
	}
	return id, nil
}

// IgnoreGoroutines returns goleak options for goroutines that etcd's
// packages leave running after every server and client is closed. With
// etcd v3.7.3 there is one: a member that closes while a peer's version
// request (GET /version on the peer port) is being served can leave that
// handler blocked for good on its closed backend's read lock
// (etcdhttp's versionHandler, in backend.baseReadTx.UnsafeRange). The
// goroutine is the server's, not a client's; it was seen once in three
// `go test ./...` runs of etcddriver's multi-member tests on a loaded
// machine.
func IgnoreGoroutines() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("go.etcd.io/etcd/server/v3/etcdserver/api/etcdhttp.newPeerHandler.versionHandler.func1"),
	}
}

// EnvChild, set to "1" in a test binary's environment, makes ServeChild
// serve: the binary becomes a one-member etcd server (see StartChild).
// EnvChildDir and EnvChildPorts tell it where to keep its data and which
// ports (client,peer) to listen on.
const (
	EnvChild      = "LOCKER_ETCDTEST_CHILD"
	EnvChildDir   = "LOCKER_ETCDTEST_CHILD_DIR"
	EnvChildPorts = "LOCKER_ETCDTEST_CHILD_PORTS"
)

// A Child is a one-member etcd server in a process of its own: the test
// binary itself, run again with EnvChild set (its package's TestMain must
// call ServeChild first). Its CPU and memory are not counted with the
// tests' (benchmarks' allocations then are the client's only), and it can
// be paused (SIGSTOP), resumed, killed (SIGKILL, as by a crash) and
// restarted on the same ports with the same data, which it fsyncs as in
// production: its leases and keys survive a kill, and a lease's TTL
// starts over when the server comes back.
//
// The process controls (PID, Pause, Resume, Kill, Restart, Close) are
// those of [proc.Server]; Close kills the child and removes its
// directory.
type Child struct {
	// ClientURL is the URL clients connect to; it stays the same across
	// restarts.
	ClientURL string

	*proc.Server
}

// ServeChild runs the server of a Child and exits, if the binary was
// started as one (EnvChild is set); otherwise it returns at once. Call it
// first in TestMain.
func ServeChild() {
	if os.Getenv(EnvChild) != "1" {
		return
	}
	if err := serveChild(); err != nil {
		fmt.Fprintln(os.Stderr, "etcdtest child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func serveChild() error {
	var client, peer int
	if _, err := fmt.Sscanf(os.Getenv(EnvChildPorts), "%d,%d", &client, &peer); err != nil {
		return fmt.Errorf("%s=%q: %w", EnvChildPorts, os.Getenv(EnvChildPorts), err)
	}
	m := &Member{
		Name:    "m0",
		own:     fmt.Sprintf("127.0.0.1:%d", client),
		PeerURL: fmt.Sprintf("http://127.0.0.1:%d", peer),
		dir:     os.Getenv(EnvChildDir),
		state:   embed.ClusterStateFlagNew, // ignored once the data directory holds a member
		tickMs:  10,
		elecMs:  100,
	}
	m.ClientURL = "http://" + m.own
	m.cluster = m.Name + "=" + m.PeerURL
	if err := m.start(); err != nil {
		return err
	}
	fmt.Println(m.ClientURL)
	// Serve until stdin closes: the parent, which never closes it, has
	// exited without a Close (which would have killed this process), as
	// benchmarks do; no restart will follow.
	_, _ = io.Copy(io.Discard, os.Stdin)
	return errors.Join(m.Close(), os.RemoveAll(m.dir))
}

// StartChild starts a Child for the duration of tb and stops it at tb's
// cleanup.
func StartChild(tb testing.TB) *Child {
	tb.Helper()
	return proc.ForTest(tb, "etcdtest", NewChild, nil)
}

// NewChild is StartChild for TestMain: it starts a Child in a temporary
// directory of its own and waits until it serves. The caller must Close
// it.
func NewChild() (*Child, error) {
	dir, err := os.MkdirTemp("", "etcdtest-child-")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 3 { // free ports can be taken by someone else before the child binds them
		ports, err := proc.FreePorts(2)
		if err != nil {
			lastErr = err
			continue
		}
		c := newChild(dir, ports[0], ports[1])
		if lastErr = c.Start(); lastErr == nil {
			return c, nil
		}
		_ = os.RemoveAll(filepath.Join(dir, "data"))
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("starting the child server: %w", lastErr)
}

func newChild(dir string, client, peer int) *Child {
	c := &Child{ClientURL: fmt.Sprintf("http://127.0.0.1:%d", client)}
	var stdout *os.File // the read end of the current run's stdout
	c.Server = proc.NewServer(proc.Config{
		Pkg:  "etcdtest",
		Addr: c.ClientURL,
		Dir:  dir,
		Launch: func() (*proc.Process, error) {
			r, w, err := os.Pipe()
			if err != nil {
				return nil, err
			}
			defer w.Close() // the child has its own descriptor
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), EnvChild+"=1", EnvChildDir+"="+dir,
				fmt.Sprintf("%s=%d,%d", EnvChildPorts, client, peer))
			cmd.Stdout, cmd.Stderr = w, os.Stderr
			if _, err := cmd.StdinPipe(); err != nil { // closed when the child exits, or with this process
				r.Close()
				return nil, err
			}
			p, err := proc.Start(cmd)
			if err != nil {
				r.Close()
				return nil, err
			}
			stdout = r
			return p, nil
		},
		Ready: func(*proc.Process) error {
			// The child prints its URL once it serves, and nothing else;
			// its stdout ends when it exits.
			defer stdout.Close()
			_ = stdout.SetReadDeadline(time.Now().Add(startTimeout))
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil {
				return fmt.Errorf("the child server did not start: %w", err)
			}
			if got := strings.TrimSpace(line); got != c.ClientURL {
				return fmt.Errorf("the child server serves %q, want %q", got, c.ClientURL)
			}
			return nil
		},
	})
	return c
}
