package main

import (
	"bytes"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-locker/locker/internal/etcdtest"
	"github.com/go-locker/locker/internal/ferrettest"
	"github.com/go-locker/locker/internal/memcachedtest"
	"github.com/go-locker/locker/internal/natstest"
	"github.com/go-locker/locker/internal/sqltest"
	"github.com/go-locker/locker/internal/testserver"
	"github.com/go-locker/locker/internal/zktest"
)

// A child is a locker process started by a test.
type child struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer // stdout and stderr
	err  bytes.Buffer // stderr
	done chan struct{}
	code int
}

// childWriter writes to a child's output, and to its stderr if stderr.
type childWriter struct {
	c      *child
	stderr bool
}

// Write records p.
func (w childWriter) Write(p []byte) (int, error) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	if w.stderr {
		w.c.err.Write(p)
	}
	return w.c.out.Write(p)
}

func (c *child) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

func (c *child) stderr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err.String()
}

// start runs the locker binary with LOCKER_URL set to url.
func start(t *testing.T, url string, args ...string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	c.cmd.Env = append(os.Environ(), "LOCKER_URL="+url)
	c.cmd.Stdout, c.cmd.Stderr = childWriter{c, false}, childWriter{c, true}
	// A command that outlives a killed locker keeps the output pipe
	// open: do not wait for it.
	c.cmd.WaitDelay = 2 * time.Second
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = c.cmd.Wait()
		c.code = c.cmd.ProcessState.ExitCode()
		close(c.done)
	}()
	t.Cleanup(func() {
		// SIGTERM, which locker passes on to the command, then SIGKILL.
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(5 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	})
	return c
}

// wait waits up to d for c to exit and returns its status.
func (c *child) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-c.done:
		return c.code
	case <-time.After(d):
		t.Fatalf("locker %q still running after %v; output:\n%s", c.cmd.Args[1:], d, c.output())
		return -1
	}
}

// lockerCmd runs the binary to its end and returns its status and output.
func lockerCmd(t *testing.T, url string, args ...string) (int, string) {
	t.Helper()
	c := start(t, url, args...)
	code := c.wait(t, 30*time.Second)
	return code, c.output()
}

// waitFile waits up to d for path to exist with content, and returns it.
func waitFile(t *testing.T, path string, d time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not written within %v", path, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// holdCmd is a command that records its LOCKER_KEY and LOCKER_TOKEN in
// file, then sleeps.
func holdCmd(file string, sleep string) []string {
	return []string{"sh", "-c", `echo "$LOCKER_KEY $LOCKER_TOKEN" > ` + file + `.tmp && mv ` + file + `.tmp ` + file + ` && exec sleep ` + sleep}
}

func redisURL(t *testing.T) string {
	return "redis://" + testserver.Redis(t).Addr
}

// TestRun_Exclusion: two `locker run` processes on one key run their
// commands one after the other, with growing tokens in the environment;
// the command's status is locker's.
func TestRun_Exclusion(t *testing.T) {
	url := redisURL(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	script := func(name string) []string {
		return []string{"sh", "-c", `echo "start ` + name + ` $LOCKER_TOKEN" >> ` + log + `; sleep 0.7; echo "end ` + name + `" >> ` + log + `; exit 7`}
	}
	a := start(t, url, append([]string{"run", "excl", "--"}, script("a")...)...)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, _ := os.ReadFile(log); len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("first command never started: %s", a.output())
		}
		time.Sleep(10 * time.Millisecond)
	}
	b := start(t, url, append([]string{"run", "excl", "--"}, script("b")...)...)
	if code := a.wait(t, 10*time.Second); code != 7 {
		t.Errorf("first locker run exited %d, want the command's 7; output:\n%s", code, a.output())
	}
	if code := b.wait(t, 10*time.Second); code != 7 {
		t.Errorf("second locker run exited %d, want the command's 7; output:\n%s", code, b.output())
	}
	data, _ := os.ReadFile(log)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "start a ") || lines[1] != "end a" || !strings.HasPrefix(lines[2], "start b ") || lines[3] != "end b" {
		t.Fatalf("commands overlapped:\n%s", data)
	}
	ta, _ := strconv.Atoi(strings.Fields(lines[0])[2])
	tb, _ := strconv.Atoi(strings.Fields(lines[2])[2])
	if ta <= 0 || tb <= ta {
		t.Errorf("tokens %d then %d; want positive and growing", ta, tb)
	}
}

// TestRun_NoWait: -n on a held key exits 75 at once, and -w gives up
// after its timeout with the same status; neither runs the command.
func TestRun_NoWait(t *testing.T) {
	url := redisURL(t)
	dir := t.TempDir()
	held := filepath.Join(dir, "held")
	start(t, url, append([]string{"run", "busy", "--"}, holdCmd(held, "30")...)...)
	waitFile(t, held, 10*time.Second)

	ran := filepath.Join(dir, "ran")
	begin := time.Now()
	code, out := lockerCmd(t, url, "run", "-n", "busy", "--", "touch", ran)
	if code != exitBusy {
		t.Errorf("run -n on a held key exited %d, want %d; output:\n%s", code, exitBusy, out)
	}
	if d := time.Since(begin); d > 3*time.Second {
		t.Errorf("run -n took %v; want an answer at once", d)
	}
	begin = time.Now()
	code, out = lockerCmd(t, url, "run", "-w", "500ms", "busy", "--", "touch", ran)
	if d := time.Since(begin); code != exitBusy || d < 500*time.Millisecond {
		t.Errorf("run -w 500ms on a held key exited %d after %v, want %d after 500ms; output:\n%s", code, d, exitBusy, out)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the command ran without the lock")
	}
	// A free key: -n runs the command.
	if code, out := lockerCmd(t, url, "run", "-n", "free", "--", "true"); code != 0 {
		t.Errorf("run -n on a free key exited %d; output:\n%s", code, out)
	}
}

// TestRun_SignalForwarded: SIGTERM to locker reaches the command, whose
// end by that signal is locker's status (128+15).
func TestRun_SignalForwarded(t *testing.T) {
	url := redisURL(t)
	held := filepath.Join(t.TempDir(), "held")
	c := start(t, url, append([]string{"run", "sig", "--"}, holdCmd(held, "30")...)...)
	waitFile(t, held, 10*time.Second)
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	if code := c.wait(t, 10*time.Second); code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit %d after SIGTERM, want %d; output:\n%s", code, 128+int(syscall.SIGTERM), c.output())
	}
	// The key was released: status finds it free at once.
	if code, out := lockerCmd(t, url, "status", "sig"); code != exitFree {
		t.Errorf("status after the command ended: exit %d; output:\n%s", code, out)
	}
}

// TestRun_LostServerKilled: when the backend dies, the hold is lost by
// its local deadline; the command is stopped and locker exits 76.
func TestRun_LostServerKilled(t *testing.T) {
	srv := testserver.PrivateRedis(t)
	held := filepath.Join(t.TempDir(), "held")
	c := start(t, "redis://"+srv.Addr, append([]string{"run", "-ttl", "1s", "-grace", "1s", "k", "--"}, holdCmd(held, "30")...)...)
	waitFile(t, held, 10*time.Second)
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if code := c.wait(t, 15*time.Second); code != exitLost {
		t.Fatalf("exit %d after the server died, want %d; output:\n%s", code, exitLost, c.output())
	}
	if !strings.Contains(c.output(), "stopping the command") {
		t.Errorf("output does not say the command was stopped:\n%s", c.output())
	}
}

// TestBackends: on every backend, by URL: status shows the holder of a
// key held by `locker run` with its token; release --force ends the hold,
// which stops the command with status 76; status then finds the key free.
func TestBackends(t *testing.T) {
	// TTLs of 3s (memcached's minimum) leave a loaded machine's renewals
	// room: with 1s, a ZooKeeper holder's lease once ran out under load
	// (status found the key free while the command ran).
	backends := []struct {
		name string
		url  func(t *testing.T) string
		ttl  string
	}{
		{"redis", redisURL, "3s"},
		{"etcd", func(t *testing.T) string {
			return "etcd://" + strings.TrimPrefix(etcdtest.Start(t).ClientURL, "http://")
		}, "3s"},
		{"zookeeper", func(t *testing.T) string { return "zk://" + zktest.Standalone(t).Addr + "/lockercli" }, "3s"},
		{"postgres", func(t *testing.T) string {
			s := sqlServer(t, sqltest.StartPostgres)
			return s.DSN
		}, "3s"},
		{"mariadb", func(t *testing.T) string {
			s := sqlServer(t, sqltest.StartMariaDB)
			db, err := sql.Open(s.Driver, s.DSN)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec("CREATE DATABASE IF NOT EXISTS lockercli"); err != nil {
				t.Fatal(err)
			}
			return "mysql://root@" + s.Addr + "/lockercli"
		}, "3s"},
		{"memcached", func(t *testing.T) string { return "memcached://" + memcachedtest.Memcached(t).Addr }, "3s"},
		{"nats", func(t *testing.T) string { return "nats://" + natstest.ForTest(t, natstest.Options{}).Addr }, "3s"},
		{"ferretdb", func(t *testing.T) string { return ferrettest.FerretDB(t).URI + "lockercli" }, "3s"},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			url := b.url(t)
			held := filepath.Join(t.TempDir(), "held")
			key := "jobs/nightly report"
			c := start(t, url, append([]string{"run", "-ttl", b.ttl, "-grace", "1s", key, "--"}, holdCmd(held, "30")...)...)
			got := waitFile(t, held, 20*time.Second)
			token := got[strings.LastIndexByte(got, ' ')+1:]
			if got != key+" "+token || token == "0" {
				t.Fatalf("command's environment: %q; want LOCKER_KEY and a non-zero LOCKER_TOKEN", got)
			}
			code, out := lockerCmd(t, url, "status", key)
			if code != 0 || !strings.Contains(out, "held (exclusive)") || !strings.Contains(out, "token "+token) {
				t.Errorf("status of the held key: exit %d; output:\n%s\nthe holder's output:\n%s", code, out, c.output())
			}
			checkFence(t, out, `highest token granted (\d+)`, token)
			code, out = lockerCmd(t, url, "status", "-json", key)
			if code != 0 || !strings.Contains(out, `"held": true`) || !strings.Contains(out, `"token": `+token) {
				t.Errorf("status -json of the held key: exit %d; output:\n%s", code, out)
			}
			checkFence(t, out, `"fence": (\d+)`, token)
			if code, out := lockerCmd(t, url, "release", key); code != exitUsage {
				t.Errorf("release without --force: exit %d; output:\n%s", code, out)
			}
			code, out = lockerCmd(t, url, "release", "--force", key)
			if code != 0 || !strings.Contains(out, "ended 1 hold") {
				t.Errorf("release --force: exit %d; output:\n%s", code, out)
			}
			if code := c.wait(t, 15*time.Second); code != exitLost {
				t.Errorf("locker run after the forced release: exit %d, want %d; output:\n%s", code, exitLost, c.output())
			}
			if code, out := lockerCmd(t, url, "status", key); code != exitFree || !strings.Contains(out, "free") {
				t.Errorf("status after the forced release: exit %d; output:\n%s", code, out)
			}
		})
	}
}

// checkFence checks that the highest token granted that status printed
// (the submatch of pattern in out) is at least token, the holder's.
func checkFence(t *testing.T, out, pattern, token string) {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(out)
	tok, _ := strconv.ParseUint(token, 10, 64)
	if m == nil {
		t.Errorf("status prints no highest token granted (%s); holder's token %s:\n%s", pattern, token, out)
		return
	}
	if fence, _ := strconv.ParseUint(m[1], 10, 64); fence < tok {
		t.Errorf("status: highest token granted %d, below the holder's token %d:\n%s", fence, tok, out)
	}
}

// sqlServer starts a database server for t, or skips t when it is not
// installed (unless LOCKER_REQUIRE_SERVERS=1).
func sqlServer(t *testing.T, startServer func() (*sqltest.Server, error)) *sqltest.Server {
	t.Helper()
	s, err := startServer()
	if err != nil {
		sqltest.SkipOrFail(t, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestSentinel: a redis+sentinel:// URL reaches the master through the
// sentinel: locker run holds the key there, and status sees it.
func TestSentinel(t *testing.T) {
	master := testserver.PrivateRedis(t)
	sentinel := testserver.Sentinel(t, master)
	url := "redis+sentinel://" + sentinel.Addr + "/" + testserver.SentinelMaster
	held := filepath.Join(t.TempDir(), "held")
	start(t, url, append([]string{"run", "k", "--"}, holdCmd(held, "30")...)...)
	got := waitFile(t, held, 20*time.Second)
	if code, out := lockerCmd(t, "redis://"+master.Addr, "status", "k"); code != 0 || !strings.Contains(out, "token "+strings.Fields(got)[1]) {
		t.Errorf("status on the master of a key held through the sentinel: exit %d; output:\n%s", code, out)
	}
}
