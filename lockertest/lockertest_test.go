package lockertest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
	"github.com/go-locker/locker/lockertest"
)

// TestMemDriver runs the suite over the in-process reference driver: every
// MakeDriver call is a new client of one backend.
func TestMemDriver(t *testing.T) {
	b := memdriver.NewBackend()
	lockertest.TestDriver(t, func(t *testing.T) driver.Driver { return b.Driver() },
		lockertest.WithCloseClient(func(t *testing.T, d driver.Driver) { d.(*memdriver.Driver).Close() }),
		lockertest.WithStall(func(t *testing.T, d driver.Driver) func() {
			d.(*memdriver.Driver).Block()
			return d.(*memdriver.Driver).Unblock
		}))
}

// TestWholeSecondTTLs runs the suite over memdriver with whole-second TTLs,
// as on etcd: the suite must round its TTLs up to TTLs the driver's
// TTLChecker accepts, and TTLCheck finds TTLs it rejects.
func TestWholeSecondTTLs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole suite with second-long leases")
	}
	t.Parallel()
	b := memdriver.NewBackend()
	lockertest.TestDriver(t, func(t *testing.T) driver.Driver {
		return &checked{Driver: b.Driver(), lo: memdriver.MinTTL, hi: memdriver.MaxTTL}
	})
}

// TestFixedTTL runs the suite over memdriver with a single TTL, as when a
// driver's leases last as long as a session: TTLRange's minimum and
// maximum are equal, and the suite uses that TTL everywhere.
func TestFixedTTL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole suite with second-long leases")
	}
	t.Parallel()
	b := memdriver.NewBackend()
	lockertest.TestDriver(t, func(t *testing.T) driver.Driver {
		return &checked{Driver: b.Driver(), lo: time.Second, hi: time.Second}
	})
}

// checked is memdriver with a TTL range of [lo, hi] and whole seconds
// only.
type checked struct {
	*memdriver.Driver
	lo, hi time.Duration
}

func (d *checked) TTLRange() (lo, hi time.Duration) { return d.lo, d.hi }

func (d *checked) CheckTTL(ttl time.Duration) error {
	if ttl%time.Second != 0 {
		return fmt.Errorf("TTL %v is not a whole number of seconds", ttl)
	}
	return nil
}
