package driverkit_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-locker/locker/driver/driverkit"
)

func TestLossCallbackOnce(t *testing.T) {
	var calls atomic.Int32
	var got error
	c := driverkit.NewLossCallback(func(err error) { calls.Add(1); got = err })
	want := errors.New("gone")
	c.Fire(want)
	c.Fire(errors.New("again"))
	c.Stop()
	if calls.Load() != 1 || got != want {
		t.Fatalf("called %d times with %v; want once with %v", calls.Load(), got, want)
	}
}

func TestLossCallbackStopWaitsAndSilences(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	c := driverkit.NewLossCallback(func(error) {
		calls.Add(1)
		close(entered)
		<-release
	})
	go c.Fire(errors.New("gone"))
	<-entered
	stopped := make(chan struct{})
	go func() { c.Stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while the call was under way")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-stopped

	c2 := driverkit.NewLossCallback(func(error) { calls.Add(1) })
	c2.Stop()
	c2.Fire(errors.New("late"))
	if calls.Load() != 1 {
		t.Fatalf("%d calls; a stopped callback must not be called", calls.Load())
	}
	var zero driverkit.LossCallback
	zero.Fire(nil) // holds no function: nothing happens
	zero.Stop()
}
