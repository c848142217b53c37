package sqldriver_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker/driver/sqldriver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/faultmatrix"
	"github.com/go-locker/locker/internal/goleak"
	"github.com/go-locker/locker/internal/sqltest"
	"github.com/go-locker/locker/internal/testflag"
)

// The servers shared by the tests of this package, or nil with the error
// that kept them from starting.
var (
	pgServer, myServer       *sqltest.Server
	pgServerErr, myServerErr error
)

// startServers starts the servers at once: each takes a second or two,
// mostly waiting for its data directory to be written.
func startServers() error {
	start := func(s **sqltest.Server, serr *error, f func() (*sqltest.Server, error)) {
		*s, *serr = f()
		if *serr == nil {
			*serr = createTable(*s)
			if *serr != nil {
				_ = (*s).Close()
				*s = nil
			}
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { start(&pgServer, &pgServerErr, sqltest.StartPostgres) })
	wg.Go(func() { start(&myServer, &myServerErr, sqltest.StartMariaDB) })
	wg.Wait()
	return errors.Join(pgServerErr, myServerErr)
}

// createTable creates the default lease table on s.
func createTable(s *sqltest.Server) error {
	db, err := openDB(s)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return sqldriver.CreateTable(ctx, db, nil)
}

func TestMain(m *testing.M) {
	faultmatrix.ServeChild(dialMatrix) // returns unless this is a helper child of the fault matrix
	serveCreateChild()                 // returns unless this is a helper child of TestCreateTableConcurrent
	testflag.Parallel(8, true)         // quick run: the conformance suites' waiting subtests together
	goleak.VerifyTestMain(drivertest.Servers(m, "sqldriver", startServers, sqltest.ErrNotInstalled,
		func() error { return drivertest.CloseAll(pgServer, myServer) }))
}
