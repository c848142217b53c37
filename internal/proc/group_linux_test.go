package proc

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

// shellGroup runs script with sh in a group (StartGroup) until the end of
// t; it skips t without sh, sleep and setsid.
func shellGroup(t *testing.T, script string) *Process {
	t.Helper()
	for _, bin := range []string{"sh", "sleep", "setsid"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("no %s binary", bin)
		}
	}
	p, err := StartGroup(exec.Command("sh", "-c", script))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p
}

// TestGroup starts a shell with two children, one in a session (and group)
// of its own as PostgreSQL's backends are, and checks that a group's Pause
// stops them all and its Kill ends them all.
func TestGroup(t *testing.T) {
	p := shellGroup(t, "sleep 60 & setsid sleep 60 & wait")
	var kids []int
	for deadline := time.Now().Add(10 * time.Second); len(kids) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("descendants %v, want 2", kids)
		}
		kids = descendants(p.PID())
	}
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range append([]int{p.PID()}, kids...) {
		if st := state(t, pid); st != "T" {
			t.Errorf("process %d in state %q after stop, want T", pid, st)
		}
	}
	if err := p.cont(); err != nil {
		t.Fatal(err)
	}
	p.Kill()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		alive := 0
		for _, pid := range kids {
			if n, _ := runningThreads(fmt.Sprintf("/proc/%d/task", pid)); n > 0 {
				alive++
			}
		}
		if alive == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d descendants alive after Kill", alive)
		}
	}
}

// TestGroupForking pauses a group whose leader keeps forking children
// that make sessions of their own, as PostgreSQL's postmaster does with
// its backends: every Pause must stop them all, the children forked just
// before it included.
func TestGroupForking(t *testing.T) {
	p := shellGroup(t, "while :; do setsid sleep 2 & sleep 0.005; done")
	for i := range 20 {
		if err := p.stop(); err != nil {
			for _, pid := range append([]int{p.PID()}, descendants(p.PID())...) {
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
				t.Logf("%.80s", b)
				ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
				for _, e := range ents {
					b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, e.Name()))
					t.Logf("  task %.80s", b)
				}
			}
			t.Fatalf("round %d: %v", i, err)
		}
		for _, pid := range append([]int{p.PID()}, descendants(p.PID())...) {
			if n, err := runningThreads(fmt.Sprintf("/proc/%d/task", pid)); err == nil && n > 0 {
				t.Fatalf("round %d: process %d has %d running threads after stop", i, pid, n)
			}
		}
		if err := p.cont(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
