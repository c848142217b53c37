package gocronreplicas

import (
	"os"
	"testing"

	"github.com/go-locker/locker/internal/goleak"
)

func TestMain(m *testing.M) {
	if cfg := os.Getenv(envReplica); cfg != "" {
		// A child process of TestReplicas: one scheduler replica.
		os.Exit(replicaMain(cfg))
	}
	goleak.VerifyTestMain(m)
}
