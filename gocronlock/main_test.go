package gocronlock_test

import (
	"testing"

	"github.com/go-locker/locker/internal/goleak"
)

// The tests with scheduler replicas in processes of their own, over
// redis-server, are in the integration module (integration/gocronreplicas):
// Redis is no dependency of this module.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
