package quorumdriver_test

import (
	"strconv"
	"sync"
	"testing"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
	"github.com/go-locker/locker/driver/quorumdriver"
	"github.com/go-locker/locker/internal/testflag"
	"github.com/go-locker/locker/lockertest"
)

// memMembers records the member drivers of every quorum driver that
// memQuorum makes, for closeClient and stall.
var memMembers sync.Map // *quorumdriver.Driver -> []*memdriver.Driver

// memQuorum returns a maker of quorum drivers over backends, each driver
// with member clients of its own.
func memQuorum(backends []*memdriver.Backend) lockertest.MakeDriver {
	return func(t *testing.T) driver.Driver {
		t.Helper()
		ms := make([]driver.Driver, len(backends))
		mds := make([]*memdriver.Driver, len(backends))
		for i, b := range backends {
			mds[i] = b.Driver()
			ms[i] = mds[i]
		}
		d, err := quorumdriver.New(ms, nil)
		if err != nil {
			t.Fatal(err)
		}
		memMembers.Store(d, mds)
		return d
	}
}

func newBackends(n int) []*memdriver.Backend {
	bs := make([]*memdriver.Backend, n)
	for i := range bs {
		bs[i] = memdriver.NewBackend()
	}
	return bs
}

func memOf(t *testing.T, d driver.Driver) []*memdriver.Driver {
	t.Helper()
	v, ok := memMembers.Load(d)
	if !ok {
		t.Fatalf("driver %T not made by memQuorum", d)
	}
	return v.([]*memdriver.Driver)
}

// memCloseClient closes every member client of d: the hook for
// lockertest's WithCloseClient.
func memCloseClient(t *testing.T, d driver.Driver) {
	for _, m := range memOf(t, d) {
		_ = m.Close()
	}
}

// memStall cuts d off from every member: the hook for lockertest's
// WithStall.
func memStall(t *testing.T, d driver.Driver) (resume func()) {
	ms := memOf(t, d)
	for _, m := range ms {
		m.Block()
	}
	return func() {
		for _, m := range ms {
			m.Unblock()
		}
	}
}

// quorumSizes returns the quorum sizes the conformance tests run: three
// and five members, only three with -short.
func quorumSizes() []int {
	if !testflag.Long() {
		return []int{3}
	}
	return []int{3, 5}
}

// TestConformanceMem runs the lockertest suite against quorums of
// memdriver members (quorumSizes).
func TestConformanceMem(t *testing.T) {
	for _, n := range quorumSizes() {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			t.Parallel()
			lockertest.TestDriver(t, memQuorum(newBackends(n)),
				lockertest.WithCloseClient(memCloseClient), lockertest.WithStall(memStall))
		})
	}
}
