package quorumdriver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/faultmatrix"
	"github.com/go-locker/locker/internal/faultproxy"
	"github.com/go-locker/locker/internal/testserver"
)

// matrixTTL is the lease length of the fault matrix on the quorum.
const matrixTTL = 400 * time.Millisecond

// nets is the Net of one quorum client: every fault applies to the
// client's connections to every member at once.
type nets []*faultproxy.Proxy

func (n nets) Blackhole(on bool) {
	for _, p := range n {
		p.Blackhole(on)
	}
}

func (n nets) DropReplies(on bool) {
	for _, p := range n {
		p.DropReplies(on)
	}
}

func (n nets) Reset() {
	for _, p := range n {
		p.Reset()
	}
}

func (n nets) Heal() {
	for _, p := range n {
		p.Heal()
	}
}

// each runs f on every server and joins the errors.
func each(ss []*testserver.Server, f func(*testserver.Server) error) error {
	var errs []error
	for _, s := range ss {
		errs = append(errs, f(s))
	}
	return errors.Join(errs...)
}

// TestFaultMatrix runs the fault matrix on a quorum of three redis-servers
// of its own. A network fault applies to a client's connections to every
// member, a server fault (pause, kill and restart) to every member: the
// faults of one member are the subject of faults_test.go. The servers
// keep nothing on disk; the tokens, from the members' clocks, still
// increase across a restart of all three. The cells that need helper
// processes are skipped: a child reaches one address, a quorum several.
func TestFaultMatrix(t *testing.T) {
	drivertest.Long(t, "the fault matrix runs for about a minute")
	ss := privateServers(t, 3)
	admins := make([]*redisdriver.Driver, len(ss))
	for i, s := range ss {
		c := memberClient(s.Addr)
		defer c.Close()
		d, err := redisdriver.New(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		admins[i] = d
	}
	faultmatrix.Run(t, faultmatrix.Target{
		Name: "quorum-redis-3",
		TTL:  matrixTTL,
		NewClient: func(tb testing.TB) faultmatrix.Client {
			t := tb.(*testing.T)
			d := redisQuorum(t, addrsOf(ss), nil)
			return faultmatrix.Client{Driver: d, Net: nets(madeOf(t, d).proxies)}
		},
		Server: faultmatrix.Server{
			Pause:   func() error { return each(ss, (*testserver.Server).Pause) },
			Resume:  func() error { return each(ss, (*testserver.Server).Resume) },
			Kill:    func() error { return each(ss, (*testserver.Server).Kill) },
			Restart: func() error { return each(ss, (*testserver.Server).Restart) },
		},
		Revoke: func(ctx context.Context, key string) error {
			var errs []error
			for _, a := range admins {
				_, err := a.ForceRelease(ctx, key)
				errs = append(errs, err)
			}
			return errors.Join(errs...)
		},
		Residue: func(ctx context.Context, key string) (int, error) {
			n := 0
			for _, a := range admins {
				st, err := a.Inspect(ctx, key)
				if err != nil {
					return 0, err
				}
				n += len(st.Holders) + st.Waiting
			}
			return n, nil
		},
		IncreasingTokens: true,
	})
}
