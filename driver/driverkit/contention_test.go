//go:build go1.25

package driverkit_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-locker/locker/driver/driverkit"
)

func TestContention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := driverkit.Contention{Window: time.Second, Max: 2}
		if c.Hot("a") {
			t.Fatal("a key never refused is hot")
		}
		c.Refused("a")
		if !c.Hot("a") {
			t.Fatal("a key just refused is not hot")
		}
		time.Sleep(999 * time.Millisecond)
		if !c.Hot("a") {
			t.Fatal("a key refused 999ms ago is not hot (window 1s)")
		}
		time.Sleep(time.Millisecond)
		if c.Hot("a") {
			t.Fatal("a key refused a window ago is still hot")
		}
		c.Refused("a")
		c.Free("a")
		if c.Hot("a") {
			t.Fatal("a key found free is still hot")
		}
		c.Refused("a")
		c.Refused("b")
		c.Refused("c") // evicts a, the least recently used
		if c.Hot("a") || !c.Hot("b") || !c.Hot("c") {
			t.Fatalf("after refusals of a, b, c with Max 2: hot a %v, b %v, c %v; want false, true, true", c.Hot("a"), c.Hot("b"), c.Hot("c"))
		}
	})
}
