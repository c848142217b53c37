package quorumdriver_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/go-locker/locker/internal/faultmatrix"
	"github.com/go-locker/locker/internal/faultproxy"
	"github.com/go-locker/locker/internal/testserver"
	"github.com/redis/go-redis/v9"
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

// memberKeys returns the Redis keys of the holds and waiters of a lock on
// one member (see redisdriver's common.lua): its exclusive hold, its
// shared holds and its queue entries' expiries.
func memberKeys(key string) []string {
	b := redisdriver.DefaultPrefix + "{" + strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D").Replace(key) + "}:"
	return []string{b + "lock", b + "readers", b + "queue-exp"}
}

// residueScript counts the live records of KEYS on one member.
var residueScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('EXISTS', KEYS[1]) + redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf') + redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf')
`)

// TestFaultMatrix runs the fault matrix on a quorum of three redis-servers
// of its own. A network fault applies to a client's connections to every
// member, a server fault (pause, kill and restart) to every member: the
// faults of one member are the subject of faults_test.go. The servers
// keep nothing on disk; the tokens, from the members' clocks, still
// increase across a restart of all three. The cells that need helper
// processes are skipped: a child reaches one address, a quorum several.
func TestFaultMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("the fault matrix runs for about a minute; skipped with -short")
	}
	ss := privateServers(t, 3)
	admins := make([]*redis.Client, len(ss))
	for i, s := range ss {
		admins[i] = memberClient(s.Addr)
		defer admins[i].Close()
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
				errs = append(errs, a.Del(ctx, memberKeys(key)[:2]...).Err())
			}
			return errors.Join(errs...)
		},
		Residue: func(ctx context.Context, key string) (int, error) {
			n := 0
			for _, a := range admins {
				k, err := residueScript.Run(ctx, a, memberKeys(key)).Int()
				if err != nil {
					return 0, err
				}
				n += k
			}
			return n, nil
		},
		IncreasingTokens: true,
	})
}
