package faultmatrix

import (
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/internal/checker"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// history returns a rec with two holds of clients 0 and 1, tokens 1 and 2,
// the second acquired at 10ms, the first ended at end0 (lost there when
// lost0), with their operations and critical sections.
func history(end0 time.Duration, lost0, paused0 bool) *rec {
	r := &rec{}
	h0 := &holdRec{client: 0, token: 1, acquired: ms(1), paused: paused0}
	h1 := &holdRec{client: 1, token: 2, acquired: ms(10), unlockCall: ms(20), doneAt: ms(21)}
	if lost0 {
		h0.doneAt, h0.unlockCall, h0.lost = end0, ms(30), true
	} else {
		h0.unlockCall, h0.doneAt = end0, end0+1
	}
	r.holds = []*holdRec{h0, h1}
	for _, op := range []checker.Op{
		{Client: 0, Kind: checker.Acquire, Token: 1, OK: true, Call: 0, Return: ms(1)},
		{Client: 1, Kind: checker.Acquire, Token: 2, OK: true, Call: ms(2), Return: ms(10)},
		{Client: 1, Kind: checker.Release, Token: 2, OK: true, Call: ms(20), Return: ms(21)},
		{Client: 0, Kind: checker.Release, Token: 1, Call: ms(30), Return: ms(31)},
	} {
		r.addOp(op)
	}
	// Client 0 read before client 1; client 1 read and wrote; client 0's
	// write comes last, with the lower token, and is refused.
	items, _ := r.res.Read(0, 1)
	r1, _ := r.res.Read(1, 2)
	if r.res.Write(1, 2, append(r1, 1)) {
		r.acked = append(r.acked, 1)
	}
	r.res.Write(0, 1, append(items, 2))
	return r
}

func TestCheck(t *testing.T) {
	if errs := history(ms(5), true, false).check(true); len(errs) != 0 {
		t.Errorf("a holder that signalled its loss before the successor: %v", errs)
	}
	errs := history(ms(15), true, false).check(true)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "overlap") {
		t.Errorf("a loss signalled after the successor's grant: %v", errs)
	}
	if errs := history(ms(15), true, true).check(true); len(errs) != 0 {
		t.Errorf("a paused holder's overlap: %v", errs)
	}
	// Not lost, not paused, and refused by the resource: two violations.
	errs = history(ms(15), false, false).check(true)
	if len(errs) != 2 || !strings.Contains(errs[1].Error(), "neither paused nor lost") {
		t.Errorf("an unlocked holder refused by the resource: %v", errs)
	}
}

func TestCheckEpochs(t *testing.T) {
	r := &rec{}
	r.holds = []*holdRec{{client: 0, token: 5, acquired: ms(1), unlockCall: ms(2), doneAt: ms(2)}}
	r.addOp(checker.Op{Client: 0, Kind: checker.Acquire, Token: 5, OK: true, Call: 0, Return: ms(1)})
	r.newEpoch(false)
	r.holds = append(r.holds, &holdRec{client: 1, token: 1, epoch: 1, acquired: ms(3), unlockCall: ms(4), doneAt: ms(4)})
	r.addOp(checker.Op{Client: 1, Kind: checker.Acquire, Token: 1, OK: true, Call: ms(2), Return: ms(3)})
	if errs := r.check(false); len(errs) != 0 {
		t.Errorf("tokens that went back across a data-losing restart, not durable: %v", errs)
	}
	if errs := r.check(true); len(errs) == 0 {
		t.Error("tokens that went back across a restart of a durable target were not flagged")
	}
}

func TestRow(t *testing.T) {
	res := &result{target: "x", cell: "c", modes: "F1", iterations: 4, headroom: []time.Duration{ms(4), ms(1), ms(3), ms(2)}, notes: []string{"b", "a", "b"}}
	if got, want := res.row(), "| x | c | F1 | 4 | 0 | 3ms / 4ms | a (1 of 4); b (2 of 4) |"; got != want {
		t.Errorf("row = %q, want %q", got, want)
	}
	res = &result{target: "x", cell: "c", modes: "F1", skipped: "why"}
	if got, want := res.row(), "| x | c | F1 | skipped | – | – | why |"; got != want {
		t.Errorf("row = %q, want %q", got, want)
	}
}

func TestClock(t *testing.T) {
	a := now()
	time.Sleep(time.Millisecond)
	if b := now(); b-a < time.Millisecond {
		t.Errorf("now advanced %v over a 1ms sleep", b-a)
	}
}
