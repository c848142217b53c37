package etcdtest

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	ServeChild()
	goleak.VerifyTestMain(m, IgnoreGoroutines()...)
}
