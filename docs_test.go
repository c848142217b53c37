package locker_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The reference files and the drivers' package docs stay short, and the
// reference files stay references: their history is in git, not in them.
const (
	maxBenchmarksLines = 400
	maxSafetyLines     = 500
	maxDriverDocLines  = 150
)

var (
	logIssue = regexp.MustCompile(`(?i)\bissues? #?\d+`)
	logStop  = regexp.MustCompile(`(?i)\bstop \d+`)
	logDate  = regexp.MustCompile(`\b20\d\d-\d\d-\d\d\b`)
	hexRun   = regexp.MustCompile(`\b[0-9a-f]{7,40}\b`)
	hasDigit = regexp.MustCompile(`[0-9]`)
	hasHexAF = regexp.MustCompile(`[a-f]`)
)

// logMarks returns what in text belongs in a log rather than a reference:
// issue numbers, "stop N", dates and commit hashes (7 to 40 hex digits
// with at least one digit and one letter, so that words and plain numbers
// do not count), each with its line number.
func logMarks(text string) []string {
	var marks []string
	for i, line := range strings.Split(text, "\n") {
		var found []string
		found = append(found, logIssue.FindAllString(line, -1)...)
		found = append(found, logStop.FindAllString(line, -1)...)
		found = append(found, logDate.FindAllString(line, -1)...)
		for _, h := range hexRun.FindAllString(line, -1) {
			if hasDigit.MatchString(h) && hasHexAF.MatchString(h) {
				found = append(found, h)
			}
		}
		for _, f := range found {
			marks = append(marks, f+" (line "+strconv.Itoa(i+1)+")")
		}
	}
	return marks
}

func lineCount(text string) int {
	return strings.Count(strings.TrimSuffix(text, "\n"), "\n") + 1
}

// TestDocReferenceFiles checks that BENCHMARKS.md and SAFETY.md are
// references of bounded length with no log marks in them.
func TestDocReferenceFiles(t *testing.T) {
	for name, limit := range map[string]int{"BENCHMARKS.md": maxBenchmarksLines, "SAFETY.md": maxSafetyLines} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if n := lineCount(string(b)); n > limit {
			t.Errorf("%s has %d lines; at most %d: it is a reference, its history is in git", name, n, limit)
		}
		if marks := logMarks(string(b)); len(marks) > 0 {
			t.Errorf("%s reads like a log (issue numbers, stops, dates or commit hashes): %s", name, strings.Join(marks, ", "))
		}
	}
}

// TestDocDriverPackageDocs checks that every driver's package doc is at
// most maxDriverDocLines long: what a user needs, with the internals in
// docs/<driver>.md or next to their code.
func TestDocDriverPackageDocs(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join("driver", "*", "doc.go"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 8 {
		t.Fatalf("found %d driver package docs (%v); want every driver's", len(docs), docs)
	}
	for _, p := range docs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if n := lineCount(string(b)); n > maxDriverDocLines {
			t.Errorf("%s has %d lines; at most %d (move internals to docs/ or next to their code)", p, n, maxDriverDocLines)
		}
	}
}

// TestDocLogMarksFound checks the checker itself on lines of the kind the
// reference files used to have, and on lines that must pass.
func TestDocLogMarksFound(t *testing.T) {
	for _, bad := range []string{
		"## Uncontended Redis pair against redislock (issue 29, item 1)",
		"Measured 2026-11-26 15:36–15:37 UTC on the 2-core shared machine",
		"Run of commit 736c4ff, 20 iterations per cell",
		"bench/compare.sh a83e76d 43b95f7 -servers redis",
		"as measured at stop 4",
	} {
		if len(logMarks(bad)) == 0 {
			t.Errorf("logMarks(%q) found nothing", bad)
		}
	}
	for _, good := range []string{
		"| in-process (`memdriver`) | 8390 (1 ms) | 369243 | memory only |",
		"tokens are about 1.8·10^15, exact until the year 2255; 1000000 pairs",
		"the token's clock reads are server time on every pair; a deadbeef-free line, effaced",
	} {
		if marks := logMarks(good); len(marks) > 0 {
			t.Errorf("logMarks(%q) = %v; want nothing", good, marks)
		}
	}
}
