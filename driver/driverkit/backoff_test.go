//go:build go1.25

package driverkit_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-locker/locker/driver/driverkit"
)

func TestBackoffSequence(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		b    driverkit.Backoff
		want []time.Duration
	}{
		{"zero value", driverkit.Backoff{}, []time.Duration{10 * ms, 20 * ms, 40 * ms, 80 * ms, 160 * ms, 320 * ms, 640 * ms, time.Second, time.Second}},
		{"min max", driverkit.Backoff{Min: 20 * ms, Max: 100 * ms}, []time.Duration{20 * ms, 40 * ms, 80 * ms, 100 * ms, 100 * ms}},
		{"multiplier 3", driverkit.Backoff{Min: ms, Max: 50 * ms, Multiplier: 3}, []time.Duration{ms, 3 * ms, 9 * ms, 27 * ms, 50 * ms}},
		{"constant", driverkit.Backoff{Min: 5 * ms, Multiplier: 0.5}, []time.Duration{5 * ms, 5 * ms, 5 * ms}},
		{"max below min", driverkit.Backoff{Min: 50 * ms, Max: 10 * ms}, []time.Duration{50 * ms, 50 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.b
			for i, want := range tc.want {
				if got := b.Next(); got != want {
					t.Fatalf("Next #%d = %v, want %v", i, got, want)
				}
			}
			b.Reset()
			if got := b.Next(); got != tc.want[0] {
				t.Fatalf("after Reset: %v, want %v", got, tc.want[0])
			}
		})
	}
}

func TestBackoffJitter(t *testing.T) {
	b := driverkit.Backoff{Min: 100 * time.Millisecond, Max: 400 * time.Millisecond, Jitter: 0.5}
	base := []time.Duration{100, 200, 400, 400}
	seen := map[time.Duration]bool{}
	for range 200 {
		b.Reset()
		for i, d := range base {
			d *= time.Millisecond
			got := b.Next()
			// Within d·[0.5, 1.5], never above Max.
			if got < d/2 || got > min(d*3/2, b.Max) {
				t.Fatalf("Next #%d = %v, outside [%v, %v]", i, got, d/2, min(d*3/2, b.Max))
			}
			seen[got] = true
		}
	}
	if len(seen) < 100 {
		t.Fatalf("only %d distinct delays in 800: no jitter?", len(seen))
	}
}

// TestBackoffWait checks, on synctest's fake clock, that Wait sleeps for
// the delays in turn and returns the context's cause at once when it ends.
func TestBackoffWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := driverkit.Backoff{Min: time.Second, Max: 4 * time.Second}
		ctx := context.Background()
		for _, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
			start := time.Now()
			if err := b.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			if got := time.Since(start); got != want {
				t.Fatalf("Wait slept %v, want %v", got, want)
			}
		}
		cause := errors.New("shutting down")
		ctx, cancel := context.WithCancelCause(ctx)
		go func() {
			time.Sleep(time.Second)
			cancel(cause)
		}()
		start := time.Now()
		if err := b.Wait(ctx); err != cause {
			t.Fatalf("Wait = %v, want the cause", err)
		}
		if got := time.Since(start); got != time.Second {
			t.Fatalf("Wait returned after %v, want 1s (at the cancel)", got)
		}
	})
}
