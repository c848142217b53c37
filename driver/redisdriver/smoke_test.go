package redisdriver_test

import (
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
)

func TestSmoke(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		d := newDriver(t, b.client(t))
		k := uniqueKey(t, "k")
		o1, o2 := owner(), owner()
		l := mustAcquire(t, d, req(k, o1, driver.Exclusive, time.Second))
		_, err := d.TryAcquire(ctxT(t), req(k, o2, driver.Exclusive, time.Second))
		t.Log(l, err)
		if err := d.Release(ctxT(t), l); err != nil {
			t.Fatal(err)
		}
		l2 := mustAcquire(t, d, req(k, o2, driver.Shared, time.Second))
		t.Log(l2)
	})
}
