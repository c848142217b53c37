package memdriver_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker/driver/memdriver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/faultmatrix"
)

// memNet injects the network faults of the matrix through a driver's
// fault hooks: Block for a black hole, LoseReplies for lost replies, and
// one failed call for a reset connection.
type memNet struct{ d *memdriver.Driver }

func (n memNet) Blackhole(on bool) {
	if on {
		n.d.Block()
	} else {
		n.d.Unblock()
	}
}

func (n memNet) DropReplies(on bool) {
	if on {
		n.d.LoseReplies(1 << 30)
	} else {
		n.d.LoseReplies(0)
	}
}

func (n memNet) Reset() { n.d.FailNext(1, nil) }

func (n memNet) Heal() {
	n.d.Unblock()
	n.d.LoseReplies(0)
	n.d.FailNext(0, nil)
}

// TestFaultMatrix runs the fault matrix on the in-process driver. Each
// client is a driver of its own on one backend. A server pause blocks
// every client (the backend's clock keeps running, as a paused server's
// does not, so holds expire during it as they would on resume); there is
// no process to kill or to pause, so those cells are skipped.
func TestFaultMatrix(t *testing.T) {
	drivertest.Long(t, "the fault matrix runs for a minute")
	b := memdriver.NewBackend()
	var (
		mu      sync.Mutex
		drivers []*memdriver.Driver
	)
	each := func(f func(*memdriver.Driver)) {
		mu.Lock()
		defer mu.Unlock()
		for _, d := range drivers {
			f(d)
		}
	}
	faultmatrix.Run(t, faultmatrix.Target{
		Name: "memdriver",
		TTL:  300 * time.Millisecond,
		NewClient: func(tb testing.TB) faultmatrix.Client {
			d := b.Driver()
			mu.Lock()
			drivers = append(drivers, d)
			mu.Unlock()
			tb.Cleanup(func() {
				mu.Lock()
				defer mu.Unlock()
				d.Unblock()
				for i, x := range drivers {
					if x == d {
						drivers = append(drivers[:i], drivers[i+1:]...)
						break
					}
				}
			})
			return faultmatrix.Client{Driver: d, Net: memNet{d}}
		},
		Server: faultmatrix.Server{
			Pause:  func() error { each((*memdriver.Driver).Block); return nil },
			Resume: func() error { each((*memdriver.Driver).Unblock); return nil },
		},
		Revoke: func(_ context.Context, key string) error {
			b.Expire(key)
			return nil
		},
		Residue: func(_ context.Context, key string) (int, error) {
			return len(b.Holders(key)) + len(b.Queued(key)), nil
		},
		DurableTokens: true,
	})
}
