package main

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDemo(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"demo", "-workers", "3", "-rounds", "2", "-ttl", "300ms", "-work", "5ms"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"acquired the lock, token 1", "6 acquisitions", "learned it lost the lock", "rejected", "before worker-2 held the lock", "worker-3 closed its client", "worker-4 acquired the lock"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(nil, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "usage") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}
