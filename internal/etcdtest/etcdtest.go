// Package etcdtest runs etcd servers for tests, each member a process of
// its own.
//
// The server is etcd's own command at the version that the unpublished
// module servers/etcd requires, built on first use by [proc.GoBinary] (so
// that etcd's server and its dependencies never enter a published go.mod).
// When it cannot be built (no go command, no module proxy), the tests that
// need it skip, or fail when LOCKER_REQUIRE_SERVERS=1. Each member listens
// on free loopback ports and keeps its data in a temporary directory of its
// own, with fsync on as in production.
//
// [Start] and [StartCluster] start a one-member server or an n-member
// cluster for the duration of a test and close it at the test's cleanup;
// [StartServer] and [NewCluster] are the variants for TestMain, where no
// testing.TB exists. A member's process controls are those of
// [proc.Server]: [Member.Pause] (SIGSTOP), [Member.Resume], [Member.Kill]
// (SIGKILL, as by a crash: its data stays) and [Member.Restart] (on the
// same ports and data); [Cluster.Leader] finds the current leader through
// each member's HTTP status endpoint.
//
// Timing: the members tick every 10 ms (a one-member server) or 20 ms (a
// cluster) with an election timeout of 100 ms or 300 ms, so that elections
// take a fraction of a second. etcd's minimum lease TTL is 1.5 election
// timeouts rounded up to whole seconds: 1 s for both (2 s with etcd's
// defaults).
//
// The servers log errors only; set LOCKER_ETCD_LOG=1 to see their
// warnings too.
package etcdtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-locker/locker/internal/proc"
)

// EnvLog, set to "1", makes the servers log warnings and errors to stderr.
const EnvLog = "LOCKER_ETCD_LOG"

// startTimeout bounds how long a member may take to become ready.
const startTimeout = 30 * time.Second

// Member is one etcd server process.
type Member struct {
	// Name is the member's name in its cluster.
	Name string
	// ClientURL is the URL clients connect to (http://127.0.0.1:port).
	ClientURL string
	// PeerURL is the URL other members connect to.
	PeerURL string

	*proc.Server

	dir     string
	cluster string // the initial-cluster string
	tickMs  int
	elecMs  int

	mu    sync.Mutex
	state string // initial-cluster-state: "new", then "existing"
}

// Cluster is a set of members that form one cluster.
type Cluster struct {
	Members []*Member
}

// A Child is a one-member server: the name is kept for the benchmarks and
// fault tests that wanted the server's CPU outside the test process, which
// every member now is.
type Child = Member

// Start starts a one-member etcd server for the duration of tb and closes
// it at tb's cleanup.
func Start(tb testing.TB) *Member {
	tb.Helper()
	c := StartCluster(tb, 1)
	return c.Members[0]
}

// StartChild is [Start].
func StartChild(tb testing.TB) *Child { tb.Helper(); return Start(tb) }

// StartServer starts a one-member etcd server in a temporary directory of
// its own, which Close removes. It is Start for TestMain.
func StartServer() (*Member, error) {
	c, err := NewCluster(1)
	if err != nil {
		return nil, err
	}
	return c.Members[0], nil
}

// NewChild is [StartServer].
func NewChild() (*Child, error) { return StartServer() }

// StartCluster starts an n-member cluster for the duration of tb and
// closes it at tb's cleanup. It skips tb when the etcd server cannot be
// built (see [proc.SkipOrFail]).
func StartCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	return proc.ForTest(tb, "etcdtest", func() (*Cluster, error) { return NewCluster(n) }, proc.ErrNoGoServer)
}

// NewCluster starts an n-member cluster, each member in a temporary
// directory of its own, and waits until every member is ready. Close
// stops the members and removes their directories. An error wraps
// [proc.ErrNoGoServer] when the etcd server cannot be built.
func NewCluster(n int) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("cluster of %d members", n)
	}
	bin, err := proc.GoBinary("etcd")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 3 { // free ports can be taken by someone else before we bind them
		c, err := newCluster(bin, n)
		if err == nil {
			return c, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func newCluster(bin string, n int) (*Cluster, error) {
	ports, err := proc.FreePorts(2 * n)
	if err != nil {
		return nil, err
	}
	tick, elec := 10, 100
	if n > 1 {
		tick, elec = 20, 300
	}
	c := &Cluster{}
	var initial []string
	for i := range n {
		dir, err := os.MkdirTemp("", fmt.Sprintf("etcdtest-m%d-", i))
		if err != nil {
			c.Close()
			return nil, err
		}
		m := &Member{
			Name:      fmt.Sprintf("m%d", i),
			ClientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]),
			PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
			dir:       dir,
			tickMs:    tick,
			elecMs:    elec,
			state:     "new",
		}
		m.Server = proc.NewServer(proc.Config{
			Pkg: "etcdtest", Addr: m.ClientURL, Dir: dir,
			Launch: func() (*proc.Process, error) { return m.launch(bin) },
			Ready:  m.ready,
			Stop:   syscall.SIGTERM,
		})
		c.Members = append(c.Members, m)
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	for _, m := range c.Members {
		m.cluster = strings.Join(initial, ",")
	}
	if err := c.startAll(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// startAll launches every member, then waits for all: the members of a
// new cluster wait for each other.
func (c *Cluster) startAll() error {
	runs := make([]*proc.Process, len(c.Members))
	for i, m := range c.Members {
		p, err := m.Launch()
		if err != nil {
			return err
		}
		runs[i] = p
	}
	errs := make([]error, len(c.Members))
	var wg sync.WaitGroup
	for i, m := range c.Members {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = m.ready(runs[i]) }()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// launch starts one run of m's server.
func (m *Member) launch(bin string) (*proc.Process, error) {
	m.mu.Lock()
	state := m.state
	m.state = "existing" // restarts rejoin
	m.mu.Unlock()
	level := "error"
	if os.Getenv(EnvLog) == "1" {
		level = "warn"
	}
	cmd := exec.Command(bin,
		"--name", m.Name,
		"--data-dir", filepath.Join(m.dir, "data"),
		"--listen-client-urls", m.ClientURL,
		"--advertise-client-urls", m.ClientURL,
		"--listen-peer-urls", m.PeerURL,
		"--initial-advertise-peer-urls", m.PeerURL,
		"--initial-cluster", m.cluster,
		"--initial-cluster-token", "etcdtest",
		"--initial-cluster-state", state,
		"--heartbeat-interval", fmt.Sprint(m.tickMs),
		"--election-timeout", fmt.Sprint(m.elecMs),
		"--log-level", level,
	)
	log, err := os.Create(filepath.Join(m.dir, "etcd.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close() // the process has its own descriptor
	cmd.Stdout, cmd.Stderr = log, log
	if level == "warn" {
		cmd.Stderr = io.MultiWriter(log, os.Stderr)
	}
	return proc.Start(cmd)
}

// ready waits until run p of m answers /health with a leader known.
func (m *Member) ready(p *proc.Process) error {
	err := proc.Poll("etcd member "+m.Name, startTimeout, 20*time.Millisecond, p.Done(), func() error {
		return m.health()
	})
	if err != nil {
		return fmt.Errorf("%w\n%s", err, proc.LogTail(filepath.Join(m.dir, "etcd.log"), 2000))
	}
	return nil
}

var httpClient = &http.Client{Timeout: time.Second}

// health asks m's /health endpoint, which answers true once m knows a
// leader and has no alarm.
func (m *Member) health() error {
	r, err := httpClient.Get(m.ClientURL + "/health")
	if err != nil {
		return err
	}
	defer r.Body.Close()
	var h struct{ Health string }
	if err := json.NewDecoder(r.Body).Decode(&h); err != nil {
		return err
	}
	if h.Health != "true" {
		return fmt.Errorf("health %q", h.Health)
	}
	return nil
}

// Running reports whether m's process runs (paused or not).
func (m *Member) Running() bool { return m.PID() != 0 }

// status asks m for its member ID and its leader's, through etcd's HTTP
// gateway.
func (m *Member) status() (id, leader string, err error) {
	r, err := httpClient.Post(m.ClientURL+"/v3/maintenance/status", "application/json", strings.NewReader("{}"))
	if err != nil {
		return "", "", err
	}
	defer r.Body.Close()
	var s struct {
		Header struct {
			MemberID string `json:"member_id"`
		} `json:"header"`
		Leader string `json:"leader"`
	}
	if err := json.NewDecoder(r.Body).Decode(&s); err != nil {
		return "", "", err
	}
	return s.Header.MemberID, s.Leader, nil
}

// IsLeader reports whether m runs and is its cluster's leader.
func (m *Member) IsLeader() bool {
	if !m.Running() || m.Paused() {
		return false
	}
	id, leader, err := m.status()
	return err == nil && id != "" && id == leader
}

// Endpoints returns the client URLs of every member.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.Members))
	for i, m := range c.Members {
		eps[i] = m.ClientURL
	}
	return eps
}

// Close stops every member and removes their directories.
func (c *Cluster) Close() error {
	var wg sync.WaitGroup
	errs := make([]error, len(c.Members))
	for i, m := range c.Members {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = m.Close() }()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Leader returns the index of the current leader among the running
// members, waiting up to timeout for one to be elected and known to all
// running, unpaused members.
func (c *Cluster) Leader(timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		if i, ok := c.agreedLeader(); ok {
			return i, nil
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("no leader agreed on within %v", timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// agreedLeader returns the leader's index when every running, unpaused
// member names the same one.
func (c *Cluster) agreedLeader() (int, bool) {
	leader, agreed := -1, true
	var want string
	for i, m := range c.Members {
		if !m.Running() || m.Paused() {
			continue
		}
		id, l, err := m.status()
		switch {
		case err != nil || l == "" || l == "0":
			agreed = false
		case want == "":
			want = l
		case want != l:
			agreed = false
		}
		if err == nil && id == l {
			leader = i
		}
	}
	return leader, agreed && leader >= 0
}
