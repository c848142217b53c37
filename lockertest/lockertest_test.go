package lockertest_test

import (
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
	"github.com/go-locker/locker/internal/testflag"
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

// TestExampleDriver runs the suite over the complete driver of
// Example_driver, which implements the three required methods only: the
// subtests of optional parts skip, every other one must pass. Stalls are
// not modelled (Driver/Stalled and Locker/Deadlines skip).
func TestExampleDriver(t *testing.T) {
	s := newStore()
	lockertest.TestDriver(t, func(t *testing.T) driver.Driver { return newMapDriver(s) },
		lockertest.WithCloseClient(func(t *testing.T, d driver.Driver) { d.(*mapDriver).Close() }))
}

// TestWholeSecondTTLs runs the suite over memdriver with whole-second TTLs,
// as on etcd: the suite must round its TTLs up to whole numbers of the
// driver's TTLUnit, and TTLUnit finds TTLs the front-end rejects.
func TestWholeSecondTTLs(t *testing.T) {
	if !testflag.Long() {
		t.Skip("runs the whole suite with second-long leases")
	}
	t.Parallel()
	b := memdriver.NewBackend()
	lockertest.TestDriver(t, func(t *testing.T) driver.Driver {
		return &checked{Driver: b.Driver(), lo: memdriver.MinTTL, hi: memdriver.MaxTTL}
	})
}

// TestFixedTTL runs the suite over memdriver with a single TTL, as when a
// driver's leases last as long as a session: its MinTTL and MaxTTL are
// equal, and the suite uses that TTL everywhere.
func TestFixedTTL(t *testing.T) {
	if !testflag.Long() {
		t.Skip("runs the whole suite with second-long leases")
	}
	t.Parallel()
	b := memdriver.NewBackend()
	lockertest.TestDriver(t, func(t *testing.T) driver.Driver {
		return &checked{Driver: b.Driver(), lo: time.Second, hi: time.Second}
	})
}

// checked is memdriver with a TTL range of [lo, hi] and a TTLUnit of a
// second.
type checked struct {
	*memdriver.Driver
	lo, hi time.Duration
}

func (d *checked) Capabilities() driver.Capabilities {
	c := d.Driver.Capabilities()
	c.MinTTL, c.MaxTTL, c.TTLUnit = d.lo, d.hi, time.Second
	return c
}
