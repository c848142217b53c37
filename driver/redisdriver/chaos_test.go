package redisdriver_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/go-locker/locker"
	"github.com/go-locker/locker/internal/checker"
	"github.com/go-locker/locker/internal/faultproxy"
	"github.com/redis/go-redis/v9"
)

// TestChaos_ContentionWithBlackholes has three clients, each behind its own
// fault proxy, contend for one key while a nemesis black-holes one client
// at a time for up to twice the TTL. Each critical section does a fenced
// read-modify-write of a shared list. Afterwards the history must be
// linearizable under the lease-lock model, no two clients that were not
// paused may have believed they held the lock at once, and no acknowledged
// update may be lost.
func TestChaos_ContentionWithBlackholes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for several seconds; skipped with -short")
	}
	srv := realServer(t)
	const clients = 3
	ttl := 300 * time.Millisecond
	run := 4 * time.Second
	key := uniqueKey(t, "chaos")
	epoch := time.Now()
	since := func() time.Duration { return time.Since(epoch) }

	var (
		mu     sync.Mutex
		ops    []checker.Op
		holds  []checker.Hold
		acked  []int
		losses int
	)
	var res checker.Resource
	proxies := make([]*faultproxy.Proxy, clients)
	mutexes := make([]*locker.Mutex, clients)
	for i := range clients {
		p, err := faultproxy.New(srv.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		proxies[i] = p
		c := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1,
			DialTimeout: ttl, ReadTimeout: ttl, WriteTimeout: ttl})
		t.Cleanup(func() { _ = c.Close() })
		mutexes[i] = locker.NewMutex(newDriver(t, c), key, locker.WithTTL(ttl), locker.WithErrorHandler(func(error) {}))
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // the nemesis
		r := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(r.IntN(int(ttl)))):
			}
			p := proxies[r.IntN(clients)]
			p.Blackhole(true)
			select {
			case <-stop:
			case <-time.After(ttl/2 + time.Duration(r.IntN(int(ttl*3/2)))):
			}
			p.Heal()
		}
	})
	for i := range clients {
		wg.Go(func() {
			m := mutexes[i]
			r := rand.New(rand.NewPCG(uint64(i), 7))
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				call := since()
				ctx, cancel := context.WithTimeout(context.Background(), 4*ttl)
				err := m.LockContext(ctx)
				cancel()
				ret := since()
				if err != nil {
					mu.Lock()
					ops = append(ops, checker.Op{Client: i, Kind: checker.Acquire, Call: call, Return: ret})
					mu.Unlock()
					continue
				}
				tok := uint64(m.Token())
				var lostAt time.Duration = -1
				lostSeen := make(chan struct{})
				done := m.Done()
				go func() {
					<-done
					lostAt = since()
					close(lostSeen)
				}()
				// Critical section: fenced read-modify-write.
				v := i*1_000_000 + n
				items, ok := res.Read(i, tok)
				work := time.Duration(r.IntN(int(ttl / 3)))
				if r.IntN(4) == 0 {
					work = ttl + time.Duration(r.IntN(int(ttl))) // outlives the lease if cut off
				}
				time.Sleep(work)
				wrote := ok && res.Write(i, tok, append(items, v))
				unlockCall := since()
				uerr := m.UnlockContext(context.Background())
				unlockRet := since()
				<-lostSeen
				ended := unlockCall
				if lostAt >= 0 && lostAt < ended {
					ended = lostAt
				}
				rel := checker.Op{Client: i, Kind: checker.Release, Token: tok, Call: unlockCall, Return: unlockRet, OK: uerr == nil}
				if uerr != nil && !errors.Is(uerr, locker.ErrLost) {
					rel.Unknown = true
				}
				mu.Lock()
				ops = append(ops, checker.Op{Client: i, Kind: checker.Acquire, Token: tok, OK: true, Call: call, Return: ret}, rel)
				holds = append(holds, checker.Hold{Client: i, Token: tok, Acquired: ret, Ended: ended})
				if wrote {
					acked = append(acked, v)
				}
				if ended < unlockCall {
					losses++
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(run)
	close(stop)
	wg.Wait()

	t.Logf("%d holds (%d ended by a loss signal), %d acknowledged updates, %d refused reads/writes",
		len(holds), losses, len(acked), len(res.Rejected()))
	if len(holds) < 10 {
		t.Fatalf("only %d holds in %v: the test did not exercise the lock", len(holds), run)
	}
	if got := checker.Linearizable(ops, 30*time.Second); got != porcupine.Ok {
		t.Errorf("history not linearizable under the lease-lock model: %v", got)
	}
	for _, err := range checker.Holds(holds) {
		t.Error(err)
	}
	if lost := res.Lost(acked); len(lost) > 0 {
		t.Errorf("%d acknowledged updates lost: %v", len(lost), lost)
	}
}
