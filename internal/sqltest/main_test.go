package sqltest

import (
	"testing"

	"github.com/go-locker/locker/internal/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
