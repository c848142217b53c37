package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/internal/testflag"
)

func TestHistQuantiles(t *testing.T) {
	var h hist
	var vals []time.Duration
	for range 10000 {
		v := time.Duration(rand.Int64N(int64(10 * time.Millisecond)))
		vals = append(vals, v)
		h.add(v)
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.99} {
		want := vals[int(q*float64(len(vals)))-1]
		got := h.quantile(q)
		if d := float64(got-want) / float64(want); d > 0.02 || d < -0.02 {
			t.Errorf("q%.2f = %v, want %v ±2%%", q, got, want)
		}
	}
	if h.quantile(1) != vals[len(vals)-1] {
		t.Errorf("max = %v, want %v", h.quantile(1), vals[len(vals)-1])
	}
	for v := int64(0); v < 1<<20; v += 37 {
		if b := bucketOf(v); lowOf(b) > v || lowOf(b+1) <= v {
			t.Fatalf("value %d in bucket %d [%d, %d)", v, b, lowOf(b), lowOf(b+1))
		}
	}
}

// noLock is a broken lock: it never excludes anyone.
type noLock struct{}

func (noLock) Lock(context.Context) error   { return nil }
func (noLock) Unlock(context.Context) error { return nil }

// chanLock is a correct in-process lock that honours ctx.
type chanLock chan struct{}

func (c chanLock) Lock(ctx context.Context) error {
	select {
	case c <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c chanLock) Unlock(context.Context) error { <-c; return nil }

func testEnv() *env { return &env{trips: map[string]*counter{}} }

func TestContendedDetectsBrokenLock(t *testing.T) {
	hs := make([]lockHandle, 4)
	for i := range hs {
		hs[i] = noLock{}
	}
	r, err := contend(testEnv(), "none", hs, 1, 200*time.Microsecond, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.violations == 0 || r.maxHolders < 2 {
		t.Fatalf("a lock that excludes nobody: %d violations, max %d holders; want them flagged", r.violations, r.maxHolders)
	}
	var buf bytes.Buffer
	rep := newReport(config{cdur: 100 * time.Millisecond})
	s := &system{name: "nolock", server: "none"}
	rep.systems = []*system{s}
	rep.con[s] = []*contendedResult{r}
	rep.writeFlags(&buf)
	if !strings.Contains(buf.String(), "MUTUAL EXCLUSION VIOLATED") {
		t.Errorf("flags do not report the violation:\n%s", buf.String())
	}
}

func TestContendedCorrectLock(t *testing.T) {
	l := make(chanLock, 1)
	hs := []lockHandle{l, l, l, l}
	cs := 100 * time.Microsecond
	r, err := contend(testEnv(), "none", hs, 1, cs, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.violations != 0 || r.maxHolders != 1 {
		t.Fatalf("%d violations, max %d holders; want 0 and 1", r.violations, r.maxHolders)
	}
	st := r.stats()
	if r.acquisitions < 100 || st.minG == 0 || len(r.events) != r.acquisitions {
		t.Fatalf("%d acquisitions (%d events), min per goroutine %d", r.acquisitions, len(r.events), st.minG)
	}
	if got := st.cs.quantile(0.5); got < cs*95/100 || got > 10*cs {
		t.Errorf("critical section p50 %v, want about %v", got, cs)
	}
	if st.handoffs != r.acquisitions-1 || st.selfHandoff+st.crossN != st.handoffs {
		t.Errorf("handoffs %d (self %d, cross %d) for %d acquisitions", st.handoffs, st.selfHandoff, st.crossN, r.acquisitions)
	}
	for i := 1; i < len(r.events); i++ {
		if r.events[i].acquired < r.events[i-1].unlockCall {
			t.Fatalf("event %d acquired before event %d's unlock call", i, i-1)
		}
	}
}

func TestWorkIsShort(t *testing.T) {
	var h hist
	for range 200 {
		t0 := time.Now()
		work(100 * time.Microsecond)
		h.add(time.Since(t0))
	}
	if p50 := h.quantile(0.5); p50 < 95*time.Microsecond || p50 > 500*time.Microsecond {
		t.Errorf("work(100µs) p50 = %v; time.Sleep would be about 1ms", p50)
	}
}

func TestTable(t *testing.T) {
	var buf bytes.Buffer
	table(&buf, "lr", []string{"a", "b"}, [][]string{{"x", "1"}, {"y", "2"}})
	want := "| a | b |\n|---|--:|\n| x | 1 |\n| y | 2 |\n\n"
	if buf.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", buf.String(), want)
	}
}

func TestCmdStats(t *testing.T) {
	a := cmdStats{"SET": 10, "INFO": 3, "GET": 5}
	b := cmdStats{"SET": 30, "INFO": 4, "GET": 5, "DEL": 2}
	d := b.sub(a)
	if len(d) != 2 || d["SET"] != 20 || d["DEL"] != 2 || d.total() != 22 {
		t.Errorf("sub = %v", d)
	}
}

// TestZKConnCounts checks that zkConn counts every request of a Write
// (locker's go-zookeeper batches them), each as a round trip, and the
// Writes apart.
func TestZKConnCounts(t *testing.T) {
	client, srv := net.Pipe()
	defer client.Close()
	go io.Copy(io.Discard, srv)
	defer srv.Close()
	c := &opCounter{trips: new(counter)}
	z := &zkConn{Conn: client, c: c}
	packet := func(op int32, body int) []byte {
		b := make([]byte, 12+body)
		binary.BigEndian.PutUint32(b, uint32(8+body))
		binary.BigEndian.PutUint32(b[8:], uint32(op))
		return b
	}
	writes := [][]byte{
		make([]byte, 44), // the connect request
		packet(14, 40),   // multi
		append(packet(2, 20), append(packet(14, 30), packet(2, 0)...)...), // delete, multi, delete in one Write
	}
	for _, w := range writes {
		if _, err := z.Write(w); err != nil {
			t.Fatal(err)
		}
	}
	got := c.snapshot()
	want := cmdStats{"connect": 1, "multi": 2, "delete": 2, zkWrites: 2}
	if !maps.Equal(got, want) {
		t.Errorf("counts %v; want %v", got, want)
	}
	if n := c.trips.Load(); n != 5 {
		t.Errorf("round trips %d; want 5", n)
	}
	if n := got.total(); n != 5 {
		t.Errorf("total %d; want 5 (the writes apart)", n)
	}
}

// TestRun runs every cell of every system for a moment against real
// servers and checks the report. Servers that are not installed are
// skipped unless LOCKER_REQUIRE_SERVERS=1.
func TestRun(t *testing.T) {
	if !testflag.Long() {
		t.Skip("starts every server and runs every cell; runs with " + testflag.EnvLong + "=1")
	}
	cfg, err := parseFlags([]string{"-quick", "-d", "150ms", "-cd", "150ms", "-many", "200"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	rep, err := run(cfg, &log)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.write(&out)
	s := out.String()
	t.Log(s)
	for _, n := range rep.notes {
		if strings.Contains(n, "skipped") {
			if os.Getenv(envRequireServers) == "1" {
				t.Errorf("%s with %s=1", n, envRequireServers)
			}
			continue
		}
		t.Errorf("note: %s", n)
	}
	for _, want := range []string{"### Targets", "### Uncontended", "### Contended", "### Systems", "mem | **locker**"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(s, "MUTUAL EXCLUSION VIOLATED") {
		t.Error("a system violated mutual exclusion")
	}
	if rep.servers["redis"] != "" {
		for _, want := range []string{"redis | **locker**", "### Contended, one client per contender", "one client per contender: round trips per acquisition", "### New-key churn"} {
			if !strings.Contains(s, want) {
				t.Errorf("redis ran but the report lacks %q", want)
			}
		}
	}
}
