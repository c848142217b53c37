package mongodriver_test

import (
	"testing"

	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/faultmatrix"
	"github.com/go-locker/locker/internal/ferrettest"
	"github.com/go-locker/locker/internal/goleak"
	"github.com/go-locker/locker/internal/proc"
	"github.com/go-locker/locker/internal/testflag"
)

// sharedServer is the FerretDB shared by the tests of this package, or
// nil with sharedServerErr when there is none.
var (
	sharedServer    *ferrettest.Server
	sharedServerErr error
)

func TestMain(m *testing.M) {
	faultmatrix.ServeChild(dialMatrix) // returns unless this is a helper child of the fault matrix
	testflag.Parallel(8, false)
	goleak.VerifyTestMain(drivertest.Servers(m, "mongodriver", func() error {
		sharedServer, sharedServerErr = ferrettest.Start()
		return sharedServerErr
	}, proc.ErrNoGoServer, func() error { return drivertest.CloseAll(sharedServer) }))
}
