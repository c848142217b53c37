package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/internal/goleak"
	"github.com/go-locker/locker/internal/testflag"
)

// bin is the locker command that the command tests run as separate
// processes: built by TestMain with go build, as a user builds it (with
// -race when the tests run with it, so that the race detector watches
// the command too).
var bin string

func TestMain(m *testing.M) {
	// The subtests of TestUnreachable and TestBackends mostly wait for
	// processes and timeouts: let them wait together.
	testflag.Parallel(8, false)
	dir, err := os.MkdirTemp("", "locker-cmd-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		if err := build(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		code := m.Run()
		if code == 0 {
			if err := goleak.Find(); err != nil {
				fmt.Fprintln(os.Stderr, "goleak:", err)
				code = 1
			}
		}
		return code
	}()
	os.Exit(code)
}

// build builds the locker command into dir and sets bin.
func build(dir string) error {
	bin = filepath.Join(dir, "locker")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	start := time.Now()
	cmd := exec.Command("go", append(args, ".")...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "built %s in %v\n", bin, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// TestDemo runs the demo with a TTL of 1s. The cut-off part checks that the
// holder learns of its loss before the next worker holds the lock: the
// safety margin (a tenth of the TTL) must exceed how late this machine
// runs the loss timer and the waiting goroutines, and with 300ms (a 30ms
// margin) a loaded two-core machine failed the check once in three
// `go test ./...` runs (the loss was seen 4ms after the successor).
func TestDemo(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"demo", "-workers", "3", "-rounds", "2", "-ttl", "1s", "-work", "5ms"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"acquired the lock, token 1", "6 acquisitions", "learned it lost the lock", "rejected", "before worker-2 held the lock", "worker-3 closed its client", "worker-4 acquired the lock",
		"worker-1 learns it no longer leads", "worker-2 elected, term 2", "held a permit at once"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestUsage: bad arguments exit 64 with a message, before any backend is
// reached (LOCKER_URL names a port nothing listens on).
func TestUsage(t *testing.T) {
	t.Setenv("LOCKER_URL", "redis://127.0.0.1:1")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage"},
		{[]string{"frobnicate"}, "unknown command"},
		{[]string{"run"}, "no KEY"},
		{[]string{"run", "k"}, "no command"},
		{[]string{"run", "k", "--"}, "no command"},
		{[]string{"run", "k", "-n", "--", "true"}, "-n after KEY"},
		{[]string{"run", "-n", "k", "-w", "2s", "--", "true"}, "-w after KEY"},
		{[]string{"run", "-ttl", "0s", "k", "--", "true"}, "-ttl"},
		{[]string{"run", "-connect-timeout", "0s", "k", "--", "true"}, "-connect-timeout"},
		{[]string{"run", "-bogus", "k", "--", "true"}, "-bogus"},
		{[]string{"run", "", "--", "true"}, "empty KEY"},
		{[]string{"status"}, "no KEY"},
		{[]string{"status", "k", "-json"}, "after KEY"},
		{[]string{"release", "k"}, "--force"},
		{[]string{"release", "--force", "k", "-v"}, "after KEY"},
		{[]string{"demo", "-workers", "1"}, "-workers"},
	} {
		var out, errOut bytes.Buffer
		if code := run(tc.args, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("locker %q: exit %d, stderr %q; want %d and %q", tc.args, code, errOut.String(), exitUsage, tc.want)
		}
	}
	t.Setenv("LOCKER_URL", "")
	var out, errOut bytes.Buffer
	if code := run([]string{"run", "k", "--", "true"}, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "LOCKER_URL") {
		t.Errorf("run without a URL: exit %d, stderr %q", code, errOut.String())
	}
}

func TestHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"-h"}, &out, &errOut); code != 0 {
		t.Fatalf("locker -h: exit %d", code)
	}
	for _, want := range []string{"locker run", "locker status", "release", "--force", "LOCKER_TOKEN", "69", "75", "76", "-connect-timeout",
		"redis://", "redis+sentinel://", "etcd://", "zk://", "postgres://", "mysql://", "memcached://", "nats://", "mongodb://"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
	for _, cmd := range []string{"run", "status", "release"} {
		out.Reset()
		errOut.Reset()
		if code := run([]string{cmd, "-h"}, &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "-connect-timeout") {
			t.Errorf("locker %s -h: exit %d, output %q", cmd, code, errOut.String())
		}
	}
}
