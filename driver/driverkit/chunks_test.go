package driverkit_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/go-locker/locker/driver/driverkit"
)

func TestChunks(t *testing.T) {
	runs := func(n, max int, weight func(int) int) string {
		var out []string
		for lo, hi := range driverkit.Chunks(n, max, weight) {
			out = append(out, fmt.Sprintf("%d-%d", lo, hi))
		}
		return fmt.Sprint(out)
	}
	ws := []int{1, 2, 2, 1, 5, 1}
	for _, c := range []struct {
		n, max int
		weight func(int) int
		want   string
	}{
		{0, 3, nil, "[]"},
		{7, 3, nil, "[0-3 3-6 6-7]"},
		{6, 3, nil, "[0-3 3-6]"},
		{6, 4, func(i int) int { return ws[i] }, "[0-2 2-4 4-5 5-6]"}, // 5 alone exceeds max: a run of its own
	} {
		if got := runs(c.n, c.max, c.weight); got != c.want {
			t.Errorf("Chunks(%d, %d) = %s; want %s", c.n, c.max, got, c.want)
		}
	}
	// Stopping early stops.
	var los []int
	for lo := range driverkit.Chunks(10, 2, nil) {
		los = append(los, lo)
		if lo == 2 {
			break
		}
	}
	if !slices.Equal(los, []int{0, 2}) {
		t.Errorf("runs before break: %v; want [0 2]", los)
	}
}
