package quorumdriver_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/quorumdriver"
	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/go-locker/locker/internal/netcount"
	"github.com/go-locker/locker/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// Pause scenario: pauseHolds holds of pauseTTL on every server, all
// paused (SIGSTOP) for pauseFor while the holds renew; a fresh key is
// asked for from the middle of the pause.
const (
	pauseHolds = 1000
	pauseFor   = 3 * time.Second
	pauseTTL   = time.Second
)

// pauseOutcome is what one run of the pause scenario measured.
type pauseOutcome struct {
	early int64 // connections dialed in the first third of the pause
	dials int64 // connections dialed during the pause
	after int64 // connections dialed from the resume to the grant

	grant time.Duration // from the resume to the grant of a fresh key
	lost  int           // holds lost
}

func (o pauseOutcome) String() string {
	return fmt.Sprintf("%d connections dialed during the pause (%d in its first third) and %d after it, fresh key granted %v after the resume, %d of %d holds lost",
		o.dials, o.early, o.after, o.grant.Round(time.Millisecond), o.lost, pauseHolds)
}

// pauseScenario takes pauseHolds holds through d, whose clients dial
// through dials, pauses every one of ss for pauseFor from just before the
// holds' first renewal, and then times the grant of a fresh key.
func pauseScenario(t *testing.T, d driver.Driver, ss []*testserver.Server, dials *netcount.Counter) pauseOutcome {
	c := locker.New(d, quiet)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	}()
	hs := make([]*locker.Hold, pauseHolds)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for g := range 16 {
		wg.Go(func() {
			for i := g; i < pauseHolds; i += 16 {
				h, err := c.Mutex(fmt.Sprintf("pause/%d", i), locker.WithTTL(pauseTTL)).Acquire(ctxT(t))
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					continue
				}
				hs[i] = h
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("taking the holds: %v", err)
	}
	before := dials.Dials()
	for _, s := range ss {
		if err := s.Pause(); err != nil {
			t.Fatal(err)
		}
	}
	var resumed time.Time
	var granted time.Time
	var fresh *locker.Hold
	var ferr error
	wg.Go(func() {
		time.Sleep(pauseFor / 2)
		fresh, ferr = c.Mutex("pause/fresh", locker.WithTTL(pauseTTL)).Acquire(ctxT(t))
		granted = time.Now()
	})
	time.Sleep(pauseFor / 3)
	early := dials.Dials() - before
	time.Sleep(pauseFor - pauseFor/3)
	during := dials.Dials() - before
	for _, s := range ss {
		if err := s.Resume(); err != nil {
			t.Fatal(err)
		}
	}
	resumed = time.Now()
	wg.Wait()
	if ferr != nil {
		t.Fatalf("a fresh key asked for during the pause: %v", ferr)
	}
	o := pauseOutcome{early: early, dials: during, after: dials.Dials() - before - during, grant: granted.Sub(resumed)}
	_ = fresh.Release(ctxT(t))
	for _, h := range hs {
		select {
		case <-h.Done():
			o.lost++
		default:
		}
	}
	return o
}

// TestPausedMembersManyHolds: with 1,000 holds (TTL 1s, member timeout
// 100ms) on a quorum of three redis-servers paused together for 3s, a
// process dials a bounded number of connections (no dial per timed-out
// member call, which would fill the members' accept queues), and is
// granted a fresh key, asked for during the pause, within the front-end's
// longest backoff of the time it takes over one redis-server paused
// likewise.
func TestPausedMembersManyHolds(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a pause of 1,000 holds takes about 10s")
	}
	ss := privateServers(t, 3)
	var dials netcount.Counter
	members := make([]driver.Driver, len(ss))
	for i, s := range ss {
		members[i] = pauseMember(t, s.Addr, &dials)
	}
	d, err := quorumdriver.New(members, nil)
	if err != nil {
		t.Fatal(err)
	}
	q := pauseScenario(t, d, ss, &dials)
	t.Logf("quorum of 3: %v", q)

	one := testserver.PrivateRedis(t)
	var oneDials netcount.Counter
	s := pauseScenario(t, pauseMember(t, one.Addr, &oneDials), []*testserver.Server{one}, &oneDials)
	t.Logf("one server: %v", s)

	// A dial per member for each connection of its client's pool (the
	// calls under way when the server stopped lose theirs), and for each
	// PING of the stall guard (at most one a second while the member does
	// not answer, see redisdriver's admit).
	if limit := int64(len(ss)) * (int64(poolSizeOf(members[0])) + int64(pauseFor/time.Second) + 1); q.dials > limit {
		t.Errorf("the quorum's clients dialed %d connections during a pause of %v; want at most %d", q.dials, pauseFor, limit)
	}
	if limit := s.grant + locker.DefaultMaxBackoff + 250*time.Millisecond; q.grant > limit {
		t.Errorf("the quorum granted a fresh key %v after the resume; want by %v (over one server: %v, plus the longest backoff, %v, plus 250ms)",
			q.grant, limit, s.grant, locker.DefaultMaxBackoff)
	}
}

// poolSizeOf returns the pool size of the client of d, a pauseMember.
func poolSizeOf(d driver.Driver) int { return pauseClients[d].Options().PoolSize }

var pauseClients = map[driver.Driver]*redis.Client{}

// pauseMember returns a redisdriver over a client of addr made as
// quorumdriver's documentation shows, dialing through dials.
func pauseMember(t *testing.T, addr string, dials *netcount.Counter) *redisdriver.Driver {
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, Dialer: dials.DialContext})
	t.Cleanup(func() { _ = c.Close() })
	d, err := redisdriver.New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	pauseClients[d] = c
	return d
}
