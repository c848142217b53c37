package redisdriver_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/faultproxy"
	"github.com/redis/go-redis/v9"
)

// made records the client (and, for proxiedDriver, the fault proxy) of
// every driver this package's tests make, for closeClient and stall.
var made drivertest.Made[redis.UniversalClient]

// proxiedDriver makes a driver whose client reaches addr through a fault
// proxy of its own, so that stall can cut this driver off alone. opts, if
// not nil, adjusts the client's options.
func proxiedDriver(t *testing.T, addr string, opts func(*redis.Options)) *redisdriver.Driver {
	t.Helper()
	p := faultproxy.ForTest(t, addr)
	o := &redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true}
	if opts != nil {
		opts(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	d, err := redisdriver.New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	made.Add(t, d, c, p)
	return d
}

// closeClient closes the client under d, a driver made by newDriver or
// proxiedDriver: afterwards every call of d must fail promptly with a
// permanent error. It is the hook for lockertest's WithCloseClient.
func closeClient(t *testing.T, d driver.Driver) {
	t.Helper()
	if err := made.Of(t, d).Client.Close(); err != nil {
		t.Fatalf("closing the client: %v", err)
	}
}

// stall makes the server stop answering d, a driver made by proxiedDriver:
// its proxy swallows every byte, connections open. resume heals the proxy
// and resets its connections, whose requests have lost their replies. It
// is the hook for lockertest's WithStall.
func stall(t *testing.T, d driver.Driver) (resume func()) {
	t.Helper()
	return made.Stall(t, d)
}

// allCalls returns every call of d on the key of l, which d holds, and on
// a key fresh for Subscribe.
func allCalls(d *redisdriver.Driver, l driver.Lease, fresh string) []drivertest.Call {
	other := driver.Request{Key: l.Key, Owner: owner(), Mode: driver.Exclusive, TTL: time.Second}
	return []drivertest.Call{
		{Name: "TryAcquire", F: func(ctx context.Context) error { _, err := d.TryAcquire(ctx, other); return err }},
		{Name: "TryAcquireQueued", F: func(ctx context.Context) error { _, err := tryQueued(d, ctx, other); return err }},
		{Name: "Refresh", F: func(ctx context.Context) error { _, err := d.Refresh(ctx, l); return err }},
		{Name: "RefreshBatch", F: func(ctx context.Context) error { return errors.Join(d.RefreshBatch(ctx, []driver.Lease{l, l})...) }},
		{Name: "Release", F: func(ctx context.Context) error { return d.Release(ctx, l) }},
		{Name: "Subscribe", F: func(ctx context.Context) error {
			s, err := d.Subscribe(ctx, l.Key)
			if err == nil {
				_ = s.Close()
				return errors.New("subscribed")
			}
			return err
		}},
		{Name: "Subscribe fresh", F: func(ctx context.Context) error {
			s, err := d.Subscribe(ctx, fresh)
			if err == nil {
				_ = s.Close()
				return errors.New("subscribed")
			}
			return err
		}},
	}
}

// TestClosedClient: after the client is closed, every call fails within
// 100ms with a permanent error, open subscriptions are woken (their
// waiter's next call fails) and the pub/sub goroutine ends.
func TestClosedClient(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		defer wantNoDispatcher(t)
		for _, hub := range []bool{true, false} {
			d := newDriver(t, b.client(t))
			k := uniqueKey(t, "k")
			l := mustAcquire(t, d, req(k, owner(), driver.Exclusive, 10*time.Second))
			var s driver.Subscription
			if hub {
				s = subscribe(t, d, k+"/sub")
			}
			closeClient(t, d)
			if hub {
				wantWake(t, "client closed", s)
			}
			drivertest.CheckClosed(ctxT(t), t, fmt.Sprintf("after Close (hub %v)", hub), allCalls(d, l, k+"/fresh"), redis.ErrClosed)
			if hub {
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

// TestStalledServer: while the server does not answer, every call with a
// 600ms deadline, all made at once, returns within 650ms with an error
// wrapping context.DeadlineExceeded, whether or not the client was created
// with ContextTimeoutEnabled, and whether or not the driver's pub/sub
// connection was open before; after the stall the driver works again.
func TestStalledServer(t *testing.T) {
	srv := realServer(t)
	// The four cases run beside each other, each on a proxy of its own;
	// no pub/sub goroutine outlives them.
	defer wantNoDispatcher(t)
	t.Run("cases", func(t *testing.T) { stalledServerCases(t, srv.Addr) })
}

func stalledServerCases(t *testing.T, addr string) {
	for _, bound := range []bool{true, false} {
		for _, hub := range []bool{true, false} {
			name := fmt.Sprintf("ContextTimeoutEnabled=%v/hub=%v", bound, hub)
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				d := proxiedDriver(t, addr, func(o *redis.Options) {
					o.ContextTimeoutEnabled = bound
					// Without ContextTimeoutEnabled, go-redis ends the
					// abandoned calls at its read timeout.
					o.ReadTimeout = time.Second
					o.MaxRetries = -1
				})
				k := uniqueKey(t, "k")
				l := mustAcquire(t, d, req(k, owner(), driver.Exclusive, 30*time.Second))
				if hub {
					s := subscribe(t, d, k+"/sub")
					defer s.Close()
				}
				resume := stall(t, d)
				drivertest.CheckStalled(t, allCalls(d, l, k+"/fresh"))
				resume()
				eventually(t, "Refresh after the stall", 10*time.Second, func() error {
					_, err := d.Refresh(ctxT(t), l)
					return err
				})
				if err := d.Release(ctxT(t), l); err != nil {
					t.Fatal(err)
				}
				if !bound {
					time.Sleep(time.Second) // the abandoned calls end at go-redis's read timeout
				}
			})
		}
	}
}
