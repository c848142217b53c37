package natsdriver_test

import (
	"testing"

	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/faultmatrix"
	"github.com/go-locker/locker/internal/goleak"
	"github.com/go-locker/locker/internal/natstest"
	"github.com/go-locker/locker/internal/testflag"
)

// sharedServer is the nats-server shared by the tests of this package, or
// nil with sharedServerErr when there is none.
var (
	sharedServer    *natstest.Server
	sharedServerErr error
)

func TestMain(m *testing.M) {
	faultmatrix.ServeChild(dialMatrix) // returns unless this is a helper child of the fault matrix
	testflag.Parallel(8, false)
	goleak.VerifyTestMain(drivertest.Servers(m, "natsdriver", func() error {
		sharedServer, sharedServerErr = natstest.Start(natstest.Options{})
		return sharedServerErr
	}, natstest.ErrNotInstalled, func() error { return drivertest.CloseAll(sharedServer) }))
}
