package sqldriver_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker/driver/sqldriver"
	"github.com/go-locker/locker/internal/faultmatrix"
	"github.com/go-locker/locker/internal/sqltest"
	"github.com/go-locker/locker/internal/testflag"
	"go.uber.org/goleak"
)

// The servers shared by the tests of this package, or nil with the error
// that kept them from starting.
var (
	pgServer, myServer       *sqltest.Server
	pgServerErr, myServerErr error
)

type mainM struct{ m *testing.M }

func (m mainM) Run() int {
	var code int
	start := func(s **sqltest.Server, serr *error, f func() (*sqltest.Server, error)) bool {
		*s, *serr = f()
		if *serr == nil {
			*serr = createTable(*s)
			if *serr != nil {
				_ = (*s).Close()
				*s = nil
			}
		}
		if *serr != nil && (!errors.Is(*serr, sqltest.ErrNotInstalled) || sqltest.Required()) {
			fmt.Fprintln(os.Stderr, "sqldriver tests:", *serr)
			return false
		}
		return true
	}
	// The servers start at once: each takes a second or two, mostly
	// waiting for its data directory to be written.
	var pgOK, myOK bool
	var wg sync.WaitGroup
	wg.Go(func() { pgOK = start(&pgServer, &pgServerErr, sqltest.StartPostgres) })
	wg.Go(func() { myOK = start(&myServer, &myServerErr, sqltest.StartMariaDB) })
	wg.Wait()
	if pgOK && myOK {
		code = m.m.Run()
	} else {
		code = 1
	}
	for _, s := range []*sqltest.Server{pgServer, myServer} {
		if s != nil {
			if err := s.Close(); err != nil {
				fmt.Fprintln(os.Stderr, "sqldriver tests:", err)
				code = 1
			}
		}
	}
	return code
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
	testflag.Parallel(8, true)         // -short: the conformance suites' waiting subtests together
	goleak.VerifyTestMain(mainM{m})
}
