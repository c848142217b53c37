package checker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/internal/checker"
	"github.com/go-locker/locker/internal/goleak"
	"github.com/go-locker/locker/internal/porcupine"
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
	add := func(client int, tok uint64, v int) bool {
		items, ok := r.Read(client, tok)
		return ok && r.Write(client, tok, append(items, v))
	}
	if !add(0, 5, 1) || !add(0, 5, 2) || !add(1, 6, 3) {
		t.Fatal("valid updates rejected")
	}
	if add(0, 5, 4) || add(2, 0, 5) {
		t.Fatal("stale updates accepted")
	}
	// A stale holder read before its successor; the successor's read
	// fences the stale write off, so nothing acknowledged is lost.
	stale, _ := r.Read(1, 6)
	fresh, _ := r.Read(2, 7)
	if !r.Write(2, 7, append(fresh, 10)) || r.Write(1, 6, append(stale, 11)) {
		t.Fatal("interleaved read-modify-write not fenced")
	}
	if got := r.Rejected(); len(got) != 3 || got[0].Client != 0 || got[0].Highest != 6 || !got[2].Write {
		t.Fatalf("rejections = %+v", got)
	}
	if lost := r.Lost([]int{1, 2, 3, 10}); len(lost) != 0 {
		t.Fatalf("lost = %v", lost)
	}
	if lost := r.Lost([]int{1, 11}); len(lost) != 1 || lost[0] != 11 {
		t.Fatalf("lost = %v", lost)
	}
}

func TestHoldsShared(t *testing.T) {
	readers := []checker.Hold{
		{Client: 0, Token: 1, Acquired: ms(0), Ended: ms(30), Shared: true},
		{Client: 1, Token: 2, Acquired: ms(5), Ended: ms(20), Shared: true},
		{Client: 2, Token: 3, Acquired: ms(31), Ended: ms(40)},
	}
	if errs := checker.Holds(readers); len(errs) != 0 {
		t.Fatalf("overlapping readers, then a writer after both: %v", errs)
	}
	// A writer must wait for every earlier reader, not only the one with
	// the token just below its own.
	readers[2].Acquired = ms(25)
	if errs := checker.Holds(readers); len(errs) != 1 || !strings.Contains(errs[0].Error(), "client 0") {
		t.Fatalf("writer inside the first reader's hold: %v", errs)
	}
	// A reader must wait for the writer before it.
	w := []checker.Hold{
		{Client: 0, Token: 1, Acquired: ms(0), Ended: ms(10)},
		{Client: 1, Token: 2, Acquired: ms(5), Ended: ms(20), Shared: true},
	}
	if errs := checker.Holds(w); len(errs) != 1 {
		t.Fatalf("reader inside a writer's hold: %v", errs)
	}
}

func TestPermits(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	ok := []checker.Hold{
		{Client: 0, Token: 1, Acquired: ms(0), Ended: ms(10), Weight: 2, Shared: true},
		{Client: 1, Token: 2, Acquired: ms(1), Ended: ms(5), Weight: 1, Shared: true},
		{Client: 2, Token: 3, Acquired: ms(5), Ended: ms(9), Weight: 1, Shared: true}, // begins as token 2 ends
		{Client: 3, Token: 4, Acquired: ms(2), Ended: ms(30), Weight: 3, Shared: true, Paused: true},
		{Client: 4, Token: 5, Acquired: ms(10), Ended: ms(12), Weight: 3, Shared: true},
	}
	if errs := checker.Permits(ok, 3); len(errs) != 0 {
		t.Errorf("Permits of a history within the limit = %v; want none", errs)
	}
	bad := append(ok, checker.Hold{Client: 5, Token: 6, Acquired: ms(4), Ended: ms(5), Weight: 1, Shared: true})
	errs := checker.Permits(bad, 3)
	if len(errs) != 1 {
		t.Fatalf("Permits with 4 of 3 permits held from 4ms to 5ms = %v; want one violation", errs)
	}
}
