package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestChurnCell runs the churn cell on the in-memory system: every key is
// new, every pair counted, and the report has the table.
func TestChurnCell(t *testing.T) {
	cfg, err := parseFlags([]string{"-quick", "-servers", "mem", "-cells", "churn"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(cfg)
	rep := newReport(cfg)
	rep.systems = e.selectedSystems()
	runChurnCells(e, rep, io.Discard, rep.systems)
	s := rep.find("mem", "locker")
	r := rep.churn[s]
	if r == nil {
		t.Fatal("no churn result for mem / locker")
	}
	if r.errors != 0 || r.pairs != cfg.churnKeys {
		t.Fatalf("churn: %d pairs, %d errors; want %d pairs, no error", r.pairs, r.errors, cfg.churnKeys)
	}
	seen := map[string]bool{}
	for round := range churnRounds(cfg) {
		for i := range cfg.churnKeys / churnRounds(cfg) {
			k := churnKey(s, int64(round), i)
			if seen[k] {
				t.Fatalf("key %q named twice", k)
			}
			seen[k] = true
		}
	}
	var out bytes.Buffer
	rep.write(&out)
	if !strings.Contains(out.String(), "### New-key churn") || !strings.Contains(out.String(), "| mem | **locker** |") {
		t.Fatalf("report lacks the churn table:\n%s", out.String())
	}
}
