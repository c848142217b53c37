package drivertest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
	"github.com/go-locker/locker/internal/drivertest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHelpers(t *testing.T) {
	if a, b := drivertest.Owner(), drivertest.Owner(); len(a) != 32 || a == b {
		t.Fatalf("Owner() = %q, %q: want two different 32-digit owners", a, b)
	}
	k1, k2 := drivertest.UniqueKey(t, "k"), drivertest.UniqueKey(t, "k")
	if k1 == k2 || !strings.HasPrefix(k1, t.Name()+"/k#") {
		t.Fatalf("UniqueKey = %q, %q", k1, k2)
	}
	ctx := drivertest.Context(t, time.Minute)
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > time.Minute {
		t.Fatalf("Context deadline %v, %v", dl, ok)
	}
	d := memdriver.New()
	r := driver.Request{Key: k1, Owner: drivertest.Owner(), Mode: driver.Exclusive, TTL: time.Second}
	l := drivertest.MustAcquire(ctx, t, d, r, r.TTL)
	if l.Token == 0 || l.Key != k1 {
		t.Fatalf("MustAcquire = %+v", l)
	}
	if err := d.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
}
