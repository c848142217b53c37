package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// bin is the locker command that the command tests run as separate
// processes: this test binary itself, which TestMain turns into the
// command when envMain is set (so that no second build is needed).
var bin string

// envMain, set to "1", makes the test binary run the locker command.
const envMain = "LOCKER_CMD_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envMain) == "1" {
		main()
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = exe
	os.Setenv(envMain, "1") // for the processes the tests start
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
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

func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"frobnicate"}, {"run"}, {"run", "k"}, {"status"}, {"release", "k"}, {"demo", "-workers", "1"}} {
		var out, errOut bytes.Buffer
		t.Setenv("LOCKER_URL", "redis://127.0.0.1:1")
		if code := run(args, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "usage") && !strings.Contains(errOut.String(), "locker") {
			t.Errorf("locker %q: exit %d, stderr %q; want %d and a message", args, code, errOut.String(), exitUsage)
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
	for _, want := range []string{"locker run", "locker status", "release", "--force", "LOCKER_TOKEN", "75", "76", "redis://", "redis+sentinel://", "etcd://", "zk://", "postgres://", "mysql://"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
	out.Reset()
	if code := run([]string{"run", "-h"}, &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "-shared") {
		t.Errorf("locker run -h: exit %d, output %q", code, errOut.String())
	}
}

func TestBadURL(t *testing.T) {
	for _, u := range []string{"ftp://x:1", "redis://", "redis+sentinel://127.0.0.1:1", "mysql://root@127.0.0.1:1", "zk://127.0.0.1:1?session=x"} {
		var out, errOut bytes.Buffer
		if code := run([]string{"status", "-url", u, "k"}, &out, &errOut); code != exitUsage {
			t.Errorf("status -url %s: exit %d, stderr %q; want %d", u, code, errOut.String(), exitUsage)
		}
	}
	// A well-formed URL of a server that is not there.
	var out, errOut bytes.Buffer
	if code := run([]string{"status", "-url", "redis://127.0.0.1:1", "k"}, &out, &errOut); code != exitBackend {
		t.Errorf("status of an unreachable Redis: exit %d, stderr %q; want %d", code, errOut.String(), exitBackend)
	}
}
