package checker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/go-locker/locker/internal/checker"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func op(client int, k checker.Kind, tok uint64, ok bool, call, ret int) checker.Op {
	return checker.Op{Client: client, Kind: k, Token: tok, OK: ok, Call: ms(call), Return: ms(ret)}
}

func TestLinearizable(t *testing.T) {
	cases := []struct {
		name string
		ops  []checker.Op
		want porcupine.CheckResult
	}{
		{"handoff", []checker.Op{
			op(0, checker.Acquire, 1, true, 0, 1),
			op(0, checker.Renew, 1, true, 2, 3),
			op(0, checker.Release, 1, true, 4, 5),
			op(1, checker.Acquire, 2, true, 6, 7),
		}, porcupine.Ok},
		{"lease lapsed, then a successor", []checker.Op{
			op(0, checker.Acquire, 1, true, 0, 1),
			op(1, checker.Acquire, 2, true, 10, 11),
			op(0, checker.Renew, 1, false, 12, 13),
			op(0, checker.Release, 1, false, 14, 15),
		}, porcupine.Ok},
		{"token did not increase", []checker.Op{
			op(0, checker.Acquire, 5, true, 0, 1),
			op(0, checker.Release, 5, true, 2, 3),
			op(1, checker.Acquire, 5, true, 4, 5),
		}, porcupine.Illegal},
		{"stale holder renewed after a successor", []checker.Op{
			op(0, checker.Acquire, 1, true, 0, 1),
			op(1, checker.Acquire, 2, true, 10, 11),
			op(0, checker.Renew, 1, true, 12, 13),
		}, porcupine.Illegal},
		{"stale holder released after a successor", []checker.Op{
			op(0, checker.Acquire, 1, true, 0, 1),
			op(1, checker.Acquire, 2, true, 10, 11),
			op(0, checker.Release, 1, true, 12, 13),
		}, porcupine.Illegal},
		{"unknown release, then a successor", []checker.Op{
			op(0, checker.Acquire, 1, true, 0, 1),
			{Client: 0, Kind: checker.Release, Token: 1, Unknown: true, Call: ms(2), Return: ms(3)},
			op(1, checker.Acquire, 2, true, 4, 5),
		}, porcupine.Ok},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := checker.Linearizable(c.ops, 10*time.Second); got != c.want {
				t.Fatalf("Linearizable = %v, want %v", got, c.want)
			}
		})
	}
}

func TestHolds(t *testing.T) {
	ok := []checker.Hold{
		{Client: 0, Token: 1, Acquired: ms(0), Ended: ms(10)},
		{Client: 1, Token: 2, Acquired: ms(11), Ended: ms(20)},
	}
	if errs := checker.Holds(ok); len(errs) != 0 {
		t.Fatal(errs)
	}
	overlap := []checker.Hold{
		{Client: 0, Token: 1, Acquired: ms(0), Ended: ms(15)},
		{Client: 1, Token: 2, Acquired: ms(11), Ended: ms(20)},
	}
	if errs := checker.Holds(overlap); len(errs) != 1 {
		t.Fatalf("overlap: %v", errs)
	}
	overlap[0].Paused = true
	if errs := checker.Holds(overlap); len(errs) != 0 {
		t.Fatalf("a paused holder's overlap was flagged: %v", errs)
	}
	twice := []checker.Hold{{Client: 0, Token: 3}, {Client: 1, Token: 3}}
	if errs := checker.Holds(twice); len(errs) != 1 {
		t.Fatalf("duplicate token: %v", errs)
	}
	order := []checker.Hold{
		{Client: 0, Token: 2, Acquired: ms(0), Ended: ms(1)},
		{Client: 1, Token: 3, Acquired: ms(-5), Ended: ms(-4)},
	}
	if errs := checker.Holds(order); len(errs) == 0 || !strings.Contains(errs[0].Error(), "acquired before") {
		t.Fatalf("order: %v", errs)
	}
}

func TestResource(t *testing.T) {
	var r checker.Resource
	if !r.Add(0, 5, 1) || !r.Add(0, 5, 2) || !r.Add(1, 6, 3) {
		t.Fatal("valid writes rejected")
	}
	if r.Add(0, 5, 4) || r.Add(2, 0, 5) {
		t.Fatal("stale writes accepted")
	}
	if got := r.Rejected(); len(got) != 2 || got[0].Client != 0 || got[0].Highest != 6 {
		t.Fatalf("rejections = %+v", got)
	}
	if lost := r.Lost([]int{1, 2, 3}); len(lost) != 0 {
		t.Fatalf("lost = %v", lost)
	}
	if lost := r.Lost([]int{1, 4}); len(lost) != 1 || lost[0] != 4 {
		t.Fatalf("lost = %v", lost)
	}
}
