package main

import (
	"bytes"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/internal/testflag"
)

func TestMedian(t *testing.T) {
	nan := math.NaN()
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{nan, 5, nan}, 5},
	} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if got := median([]float64{nan}); !math.IsNaN(got) {
		t.Errorf("median of nothing = %v, want NaN", got)
	}
}

func TestSeriesVerdict(t *testing.T) {
	c := newComparison(2)
	c.add(0, 0, []record{{Cell: "u", System: "s", Metric: "pairs/s", Value: 100, Primary: true}, {Cell: "u", System: "s", Metric: "cpu", Value: 10, Lower: true}})
	c.add(1, 0, []record{{Cell: "u", System: "s", Metric: "pairs/s", Value: 90, Primary: true}, {Cell: "u", System: "s", Metric: "cpu", Value: 9, Lower: true}})
	c.add(0, 1, []record{{Cell: "u", System: "s", Metric: "pairs/s", Value: 100, Primary: true}, {Cell: "u", System: "s", Metric: "cpu", Value: 10, Lower: true}})
	c.add(1, 1, []record{{Cell: "u", System: "s", Metric: "pairs/s", Value: 98, Primary: true}, {Cell: "u", System: "s", Metric: "cpu", Value: 9, Lower: true}})
	rate, cpu := c.order[0], c.order[1]
	if q, ok := rate.ratio(); !ok || math.Abs(q-0.94) > 1e-9 {
		t.Errorf("ratio of medians = %v, want 0.94", q)
	}
	if lo, hi, _ := rate.roundRatios(); lo != 0.9 || hi != 0.98 {
		t.Errorf("round ratios %v–%v, want 0.9–0.98", lo, hi)
	}
	if v := rate.verdict(); v != "**worse** in all 2 rounds" {
		t.Errorf("6 %% fewer pairs/s: %q", v)
	}
	if v := cpu.verdict(); v != "better in all 2 rounds" {
		t.Errorf("10 %% less CPU: %q", v)
	}
	noisy := newComparison(3)
	for round, v := range [][2]float64{{100, 70}, {100, 110}, {100, 80}} {
		noisy.add(0, round, []record{{Cell: "c", System: "s", Metric: "acq/s", Value: v[0]}})
		noisy.add(1, round, []record{{Cell: "c", System: "s", Metric: "acq/s", Value: v[1]}})
	}
	if v := noisy.order[0].verdict(); v != "worse, rounds disagree" {
		t.Errorf("0.8 with a round at 1.1: %q", v)
	}
	var buf bytes.Buffer
	c.write(&buf, cmpHeader{names: [2]string{"A", "B"}, cmd: "cmd"})
	if !strings.Contains(buf.String(), "| u | s | pairs/s | 100 | 94.0 | 0.940 | 0.90–0.98 | **worse** in all 2 rounds |") {
		t.Errorf("summary row missing:\n%s", buf.String())
	}
}

func TestParseExtServers(t *testing.T) {
	m, err := parseExtServers("redis=127.0.0.1:6379@12,zk=127.0.0.1:2181@13")
	if err != nil || m["redis"] != (extServer{"127.0.0.1:6379", 12}) || m["zk"].pid != 13 || len(m) != 2 {
		t.Errorf("got %v, %v", m, err)
	}
	for _, bad := range []string{"redis=127.0.0.1:6379", "mysql=h:1@2", "redis=h:1@x"} {
		if _, err := parseExtServers(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestChildArgs checks that a child run parses to the cells the -compare
// process selected.
func TestChildArgs(t *testing.T) {
	cfg, err := parseFlags([]string{"-compare", "a,b", "-n", "3,5", "-cd", "700ms"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.dur != time.Second || cfg.only.String() != lockerOnly || !cfg.servers["zk"] || cfg.servers["mem"] {
		t.Errorf("-compare defaults not applied: d %v, only %v, servers %v", cfg.dur, cfg.only, cfg.servers)
	}
	child, err := parseFlags(childArgs(cfg, cmpCell{"redis", "c"}, "redis=h:1@2", "f.json"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if child.cdur != 700*time.Millisecond || child.dur != time.Second || child.rounds != 1 || child.crounds != 1 ||
		len(child.ns) != 2 || child.ns[1] != 5 || child.only.String() != lockerOnly || child.jsonOut != "f.json" ||
		!child.cells["c"] || len(child.cells) != 1 || !child.servers["redis"] || len(child.servers) != 1 ||
		child.useServers["redis"].pid != 2 || child.cmp.bins != "" || child.many != cfg.many || child.manyTTL != cfg.manyTTL || child.churnKeys != 2000 {
		t.Errorf("child config %+v", child)
	}
}

// TestCompare builds the bench and compares it with itself on the
// in-process memdriver and, when redis-server is installed, on Redis, and
// checks that every cell has a ratio and no run failed.
func TestCompare(t *testing.T) {
	if !testflag.Long() {
		t.Skip("builds the bench and starts servers; runs with " + testflag.EnvLong + "=1")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bench")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	servers := "mem"
	if _, err := exec.LookPath("redis-server"); err == nil || os.Getenv(envRequireServers) == "1" {
		servers = "redis,mem"
	}
	var out, log bytes.Buffer
	cmd := exec.Command(bin, "-compare", bin+","+bin, "-compare-names", "A,B", "-compare-rounds", "2",
		"-servers", servers, "-d", "100ms", "-cd", "100ms", "-n", "4", "-many", "200", "-many-ttl", "600ms", "-periods", "1", "-churn-keys", "200")
	cmd.Stdout, cmd.Stderr = &out, &log
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	s := out.String()
	t.Log(s)
	if strings.Contains(s, "run failed") || strings.Contains(s, "**A:") || strings.Contains(s, "**B:") {
		t.Error("a run failed or reported errors")
	}
	want := []string{"| uncontended: one goroutine, one key | mem / locker | pairs/s |", "| one key: N=4, 4 clients | mem / locker | acq/s |", "| churn: 200 new keys, one goroutine | mem / locker |"}
	if servers != "mem" {
		want = append(want, "| uncontended: one goroutine, one key | redis / locker | pairs/s |", "| one key: N=4, 1 client | redis / locker 1 driver | acq/s |",
			"| many locks: 200 held (redis) | redis / locker | locks acquired/s |", "| parallel: 16 goroutines, distinct keys | redis / locker | pairs/s |")
	}
	for _, w := range want {
		i := strings.Index(s, w)
		if i < 0 {
			t.Errorf("no summary row %q", w)
			continue
		}
		// old, new, new/old: numbers, not dashes.
		row := strings.Split(strings.SplitN(s[i:], "\n", 2)[0], "|")
		if len(row) < 8 || strings.TrimSpace(row[6]) == "–" {
			t.Errorf("row %q has no ratio", row)
		}
	}
}
