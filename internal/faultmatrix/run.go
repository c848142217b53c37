package faultmatrix

import (
	"os"
	"strconv"
	"testing"

	"github.com/go-locker/locker"
)

const (
	// EnvIterations names the environment variable that sets how many
	// times each cell runs (default 3), for a longer pass than CI's.
	EnvIterations = "LOCKER_FAULT_ITERATIONS"
	// EnvReport names the environment variable that names a file to which
	// every cell appends its markdown table row.
	EnvReport = "LOCKER_FAULT_REPORT"
)

// iterations returns how many times each cell runs.
func iterations() int {
	if n, err := strconv.Atoi(os.Getenv(EnvIterations)); err == nil && n > 0 {
		return n
	}
	return 3
}

func run(t *testing.T, tg Target) {
	t.Skip("faultmatrix: cells not written yet")
}

func serveChild(dial Dialer, opts []locker.Option) {}
