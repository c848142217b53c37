// Package faultmatrix is the driver-independent fault × driver matrix: a
// set of cells, each injecting one kind of real fault (a black-holed
// network, lost replies, reset connections, a paused or killed server, a
// paused client process, admin revocation, cancellation, contention) while
// clients lock one key through package locker, and each checking the
// contract of package locker (its "Guarantees") on every history it
// records:
//
//   - the history is linearizable under the lease-lock model
//     ([checker.Linearizable]);
//   - the holds, as each client believed them, do not overlap when sorted
//     by token ([checker.Holds]);
//   - a fenced resource updated read-modify-write in every critical section
//     loses no acknowledged update, and refuses only holders that were
//     paused or had lost their hold ([checker.Resource]);
//   - a holder that is not paused signals its loss before any other
//     client's Lock returns, and no hold is declared lost when the fault is
//     shorter than TTL minus the front-end's safety margin.
//
// A driver package runs the matrix with one call, [Run], given a [Target]
// that says how to reach its backend and which faults it can inject; a cell
// whose capability the target lacks is skipped with the reason. Cells that
// need processes of their own (a client paused with SIGSTOP, contention
// between processes) re-execute the test binary as a helper child: the
// package's TestMain must call [ServeChild] first.
//
// Each cell runs a few iterations in CI, more when [EnvIterations] is set
// for a longer pass, and reports its figures (iterations, violations,
// loss-detection headroom) as a markdown table row through t.Log, also
// appended to the file named by [EnvReport] when that is set; SAFETY.md at
// the repository root summarises the results.
//
// Times of events in different processes are compared on CLOCK_MONOTONIC
// (clock_gettime on Linux), which all processes of a
// host share and which no wall-clock step moves.
package faultmatrix

import (
	"context"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/internal/faultproxy"
)

// Net injects network faults between one client and its server.
// *faultproxy.Proxy implements it; so can an in-process backend's fault
// hooks.
type Net interface {
	// Blackhole swallows every byte in both directions while on is true;
	// connections stay open, as in a partition.
	Blackhole(on bool)
	// DropReplies lets requests reach the server, and be applied, but
	// swallows the replies while on is true.
	DropReplies(on bool)
	// Reset closes every open connection; the client must reconnect.
	Reset()
	// Heal turns every fault off.
	Heal()
}

// Client is one client of the backend: a driver with connections of its
// own, as if it were in a process of its own, and the network between it
// and the server.
type Client struct {
	// Driver is the client's driver. Cells wrap it in locker.Mutex,
	// RWMutex and ReentrantMutex handles.
	Driver driver.Driver
	// Net injects faults on this client's connections only. Nil means the
	// target cannot: cells that need it are skipped.
	Net Net
}

// Server controls the server process(es) the target's clients talk to.
// A nil function means the capability is absent: the cells that need it
// are skipped with the reason.
type Server struct {
	// Pause stops the server without closing its connections (SIGSTOP);
	// Resume lets it run again (SIGCONT).
	Pause, Resume func() error
	// Kill kills the server at once (SIGKILL, no shutdown); Restart starts
	// it again on the same address after Kill, keeping or losing its data
	// as the backend's configuration does (see Target.DurableTokens).
	// Restart returns once the server accepts requests again.
	Kill, Restart func() error
}

// Dialer opens a client of the server at addr (the string [Target.Addr]
// returned, or a fault proxy's address in front of it) and returns its
// driver and a function that closes the client. It must work in a fresh
// process (a helper child), from addr alone.
type Dialer func(addr string) (d driver.Driver, closeFn func() error, err error)

// Target describes one driver and its backend to the matrix.
type Target struct {
	// Name names the target in test names and the report, such as
	// "redis" or "memdriver".
	Name string
	// TTL is the lease length the cells use; the driver must accept it.
	// Short TTLs keep the matrix fast: 300ms to 600ms for Redis and the
	// in-process driver, whole seconds where the backend needs them.
	// Fault lengths are derived from it and from the front-end's safety
	// margin, max(TTL/10, min(20ms, TTL/4)).
	TTL time.Duration
	// Options are applied to every handle the cells create, after the
	// matrix's own (WithTTL, an error handler), in this process and in
	// helper children (see ServeChild).
	Options []locker.Option

	// Addr returns the address of the server for a new client, for network
	// backends: one host:port, since the matrix puts a faultproxy.Proxy in
	// front of it. With Dial, it lets the matrix build clients behind
	// proxies of their own and start helper children, each behind its own
	// proxy too.
	Addr func() string
	// Dial opens a client at an address; see Dialer.
	Dial Dialer
	// NewClient, when set, makes the clients instead of Addr and Dial:
	// for in-process backends, or for network backends that build their
	// own fault injection (clusters of several members). It must register
	// the client's closing with tb.Cleanup. Cells that need helper
	// children still use Addr and Dial, and are skipped without them.
	NewClient func(tb testing.TB) Client
	// Net, when set, turns the fault proxy that the matrix puts in front
	// of each client it makes from Addr and Dial, and of each helper
	// child, into that client's or child's Net ([Partition] for protocols
	// whose framing must not see a message torn in two). Nil: the proxy
	// itself.
	Net func(p *faultproxy.Proxy) Net

	// Server controls the server process(es).
	Server Server
	// Revoke revokes, as an administrator would, every hold of key on the
	// server (Redis DEL or CLIENT KILL, etcd lease revoke, ZooKeeper
	// session close). Nil: the revocation cell is skipped.
	Revoke func(ctx context.Context, key string) error
	// Residue returns how many records of holds and of waiters of key the
	// server keeps (fence counters and other records that outlive every
	// hold by design are not counted), to prove that a cancelled or failed
	// Lock left nothing behind. Nil: the cells check only through the
	// locks' behaviour.
	Residue func(ctx context.Context, key string) (int, error)
	// DurableTokens reports that tokens keep increasing across Kill and
	// Restart. When false, the restart cell still records tokens that went
	// backwards, as an expected consequence the driver documents, rather
	// than a violation, and the report says so.
	DurableTokens bool
	// IncreasingTokens reports that tokens after Kill and Restart are
	// greater than every token before, even where the restart loses the
	// holds themselves (a server that keeps nothing on disk, whose driver
	// takes tokens from the server's clock). The restart cell then checks
	// that the successor's token is greater than the lost holder's, and
	// the fenced resource keeps its highest token across the restart, so
	// that it refuses the lost holder's stale writes; holds are still
	// checked per epoch unless DurableTokens is set.
	IncreasingTokens bool
}

// Partition is a [Target.Net] for protocols whose framing must see the
// byte stream whole: p as a faultproxy.Partitioner.
func Partition(p *faultproxy.Proxy) Net { return faultproxy.Partitioner{Proxy: p} }

// A Process is a server process of the tests that the matrix can pause,
// resume, kill and restart, such as a proc.Server.
type Process interface {
	Pause() error
	Resume() error
	Kill() error
	Restart() error
}

// ProcessTarget returns a Target named name, with leases of ttl, for the
// server process p at the fixed address addr, which dial reaches. The
// caller sets the rest (Revoke, Residue, Net, the tokens' promises).
func ProcessTarget(name string, ttl time.Duration, addr string, dial Dialer, p Process) Target {
	return Target{
		Name:   name,
		TTL:    ttl,
		Addr:   func() string { return addr },
		Dial:   dial,
		Server: Server{Pause: p.Pause, Resume: p.Resume, Kill: p.Kill, Restart: p.Restart},
	}
}

// Run runs every cell of the matrix against tg, each as a subtest of t
// named after the cell. It runs the cells one after the other.
func Run(t *testing.T, tg Target) {
	t.Helper()
	run(t, tg)
}

// ServeChild runs this process as a helper child of the matrix when its
// environment says it is one: it dials the server with dial, applies opts
// to its handles, does what the parent asked (hold a key, or contend for
// it), reports events on stdout and exits. Otherwise it returns at once.
// Call it first thing in TestMain of every package that calls Run:
//
//	func TestMain(m *testing.M) {
//		faultmatrix.ServeChild(dial)
//		goleak.VerifyTestMain(m)
//	}
//
// Pass the same options as Target.Options.
func ServeChild(dial Dialer, opts ...locker.Option) {
	serveChild(dial, opts)
}
