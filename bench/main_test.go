package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	maybeServeEtcd() // the etcd child process is this test binary
	goleak.VerifyTestMain(m)
	os.Exit(0)
}
