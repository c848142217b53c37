package testflag_test

import (
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/go-locker/locker/internal/goleak"
	"github.com/go-locker/locker/internal/testflag"
)

func TestMain(m *testing.M) {
	testflag.Parallel(8, false)
	goleak.VerifyTestMain(m)
}

// TestParallel checks the -parallel that TestMain set, unless the command
// line gave one.
func TestParallel(t *testing.T) {
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(a, "-test.parallel") {
			t.Skipf("-parallel given on the command line: %s", a)
		}
	}
	got, err := strconv.Atoi(flag.Lookup("test.parallel").Value.String())
	if err != nil || got < 8 {
		t.Errorf("-test.parallel = %d, %v; want at least 8", got, err)
	}
}
