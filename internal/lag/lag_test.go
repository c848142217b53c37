package lag_test

import (
	"testing"
	"time"

	"github.com/go-locker/locker/internal/goleak"
	"github.com/go-locker/locker/internal/lag"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBound(t *testing.T) {
	p := lag.Start()
	time.Sleep(30 * time.Millisecond)
	if b := p.Bound(600*time.Millisecond, 50*time.Millisecond); b < 650*time.Millisecond {
		t.Errorf("Bound = %v; want at least 650ms", b)
	}
}
