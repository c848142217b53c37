//go:build unix

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-locker/locker/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// secret is the password of every backend URL of these tests; no output
// of locker may contain it.
const secret = "S3cret-PW"

// testTimeout is the -connect-timeout of these tests, and slack how much
// longer than that a loaded machine may take to start locker, let it give
// up and exit.
const (
	testTimeout = 3 * time.Second
	slack       = 10 * time.Second
)

// deadAddr returns a loopback address that refuses connections: a socket
// bound to it and kept, never listening, so that no server can take the
// port while the test runs.
func deadAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}

// silentAddr returns the address of a server that accepts connections and
// never answers: a backend that hangs.
func silentAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// backendURLs are URLs of every scheme for a backend at addr, each with
// the secret as its password where the scheme takes one.
func backendURLs(addr string) map[string]string {
	return map[string]string{
		"redis":    "redis://app:" + secret + "@" + addr + "/0",
		"sentinel": "redis+sentinel://app:" + secret + "@" + addr + "/mymaster",
		"etcd":     "etcd://app:" + secret + "@" + addr,
		"zk":       "zk://" + addr + "/locker",
		"postgres": "postgres://app:" + secret + "@" + addr + "/db?sslmode=disable",
		"mysql":    "mysql://app:" + secret + "@" + addr + "/db",
		"memcache": "memcached://" + addr,
		"nats":     "nats://app:" + secret + "@" + addr,
		"mongodb":  "mongodb://app:" + secret + "@" + addr + "/db",
	}
}

// checkBackendFailure checks the end of a locker run against a backend
// that cannot be used: exit 69 within the connect timeout and slack, one
// line on stderr that names the backend, no secret, nothing on stdout.
func checkBackendFailure(t *testing.T, c *child, begin time.Time, timeout time.Duration, sub string) {
	t.Helper()
	code := c.wait(t, timeout+slack)
	took := time.Since(begin)
	errOut := c.stderr()
	if code != exitBackend {
		t.Errorf("locker %q: exit %d after %v, want %d; output:\n%s", c.cmd.Args[1:], code, took, exitBackend, c.output())
	}
	if lines := strings.Split(strings.TrimSpace(errOut), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "locker "+sub+": backend ") {
		t.Errorf("locker %q: stderr is not one line \"locker %s: backend …\":\n%s", c.cmd.Args[1:], sub, errOut)
	}
	if out := c.output(); strings.Contains(out, secret) || out != errOut {
		t.Errorf("locker %q: output has the secret or something on stdout:\n%s", c.cmd.Args[1:], out)
	}
	t.Logf("locker %q: exit %d after %v: %s", c.cmd.Args[1:], code, took.Round(time.Millisecond), strings.TrimSpace(errOut))
}

// TestUnreachable: every subcommand, on every scheme, against a port that
// refuses connections and a server that never answers, exits 69 within
// -connect-timeout (and slack) with one line, never 75, never running the
// command: with -w shorter and longer than the timeout, and with -n.
func TestUnreachable(t *testing.T) {
	ran := filepath.Join(t.TempDir(), "ran")
	cmds := [][]string{
		{"status", "k"},
		{"release", "--force", "k"},
		{"run", "k", "--", "touch", ran},
		{"run", "-w", "1s", "k", "--", "touch", ran},
		{"run", "-w", "1m", "k", "--", "touch", ran},
		{"run", "-n", "k", "--", "touch", ran},
	}
	for _, kind := range []string{"refused", "silent"} {
		addr := map[string]func(*testing.T) string{"refused": deadAddr, "silent": silentAddr}[kind](t)
		for scheme, url := range backendURLs(addr) {
			t.Run(kind+"/"+scheme, func(t *testing.T) {
				t.Parallel()
				for _, args := range cmds {
					begin := time.Now()
					c := start(t, url, append([]string{args[0], "-connect-timeout", testTimeout.String()}, args[1:]...)...)
					checkBackendFailure(t, c, begin, testTimeout, args[0])
				}
			})
		}
	}
	// The default timeout, at most 10s, on a server that never answers.
	begin := time.Now()
	c := start(t, backendURLs(silentAddr(t))["redis"], "run", "k", "--", "touch", ran)
	checkBackendFailure(t, c, begin, defaultConnectTimeout, "run")
	if _, err := os.Stat(ran); err == nil {
		t.Error("a command ran without the lock")
	}
}

// TestBadURL: a URL that names no backend properly is a usage error (64),
// by -url or LOCKER_URL, before anything is dialled.
func TestBadURL(t *testing.T) {
	for _, u := range []string{"ftp://x:1", "redis://", "redis://h:port", "redis+sentinel://127.0.0.1:1", "mysql://root@127.0.0.1:1",
		"zk://127.0.0.1:1?session=x", "zk://127.0.0.1:1?session=-1s", "memcached://h:1?locker_prefix=a%20b",
		"nats://h:1?replicas=x", "nats://h:1?replicas=0"} {
		if code, out := lockerCmd(t, "", "status", "-url", u, "k"); code != exitUsage || !strings.Contains(out, "bad backend URL") {
			t.Errorf("status -url %s: exit %d, want %d; output:\n%s", u, code, exitUsage, out)
		}
		if code, out := lockerCmd(t, u, "run", "k", "--", "true"); code != exitUsage || !strings.Contains(out, "bad backend URL") {
			t.Errorf("LOCKER_URL=%s run: exit %d, want %d; output:\n%s", u, code, exitUsage, out)
		}
	}
}

// TestVerbose: -v shows the client libraries' own logs (go-redis's dial
// errors), still without the secret.
func TestVerbose(t *testing.T) {
	c := start(t, backendURLs(deadAddr(t))["redis"], "status", "-v", "-connect-timeout", "1s", "k")
	if code := c.wait(t, time.Second+slack); code != exitBackend {
		t.Errorf("status -v: exit %d, want %d", code, exitBackend)
	}
	out := c.output()
	if !strings.Contains(out, "go-redis: ") || strings.Contains(out, secret) {
		t.Errorf("status -v: want go-redis's log and no secret:\n%s", out)
	}
}

// aclRedis returns the URL of a private Redis server that knows user app
// with the secret as password.
func aclRedis(t *testing.T) (url string, srv *testserver.Server) {
	srv = testserver.PrivateRedis(t)
	cli := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cli.Do(ctx, "ACL", "SETUSER", "app", "on", ">"+secret, "~*", "&*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	return "redis://app:" + secret + "@" + srv.Addr, srv
}

// TestNoSecretInOutput runs every output path of locker with a URL that
// has a password, given by LOCKER_URL and by -url, and greps the output
// for it: usage messages of every subcommand, help, bad URLs, a refused
// password, status and release of a held key, -v's logs, busy, and a
// backend lost while waiting.
func TestNoSecretInOutput(t *testing.T) {
	url, srv := aclRedis(t)
	held := filepath.Join(t.TempDir(), "held")
	var outs []string
	runAll := func(env string, argss ...[]string) {
		for _, args := range argss {
			code, out := lockerCmd(t, env, args...)
			t.Logf("locker %q: exit %d", args, code)
			// The header names the arguments without the secret: only
			// the output is searched.
			header := strings.ReplaceAll(fmt.Sprintf("locker %q (exit %d):", args, code), secret, "<password>")
			outs = append(outs, header+"\n"+out)
		}
	}
	holder := start(t, url, append([]string{"run", "-v", "k", "--"}, holdCmd(held, "30")...)...)
	waitFile(t, held, 20*time.Second)
	runAll(url, []string{}, []string{"-h"}, []string{"nope"}, []string{"run"}, []string{"run", "-bogus"}, []string{"run", "-h"},
		[]string{"run", "k", "-n", "--", "true"}, []string{"status", "-bogus"}, []string{"status", "-h"}, []string{"status", "a", "b"},
		[]string{"release", "k"}, []string{"release", "-h"}, []string{"status", "k"}, []string{"status", "-json", "-v", "k"},
		[]string{"run", "-v", "-n", "k", "--", "true"}, []string{"run", "-v", "-w", "1s", "k", "--", "true"})
	bad := strings.Replace(url, "@", "x@", 1) // a wrong password
	runAll(bad, []string{"status", "-v", "k"}, []string{"run", "k", "--", "true"})
	for _, u := range []string{"redis://app:" + secret + "@host:port", "redis://app:" + secret + "@", "ftp://app:" + secret + "@h:1",
		"redis+sentinel://app:" + secret + "@h:1", "mysql://app:" + secret + "@h:1", "zk://app:" + secret + "@h:1?session=x",
		"postgres://app@127.0.0.1:1/db?password=" + secret} {
		runAll("", []string{"status", "-url", u, "k"}, []string{"status", "-url=" + u, "-bogus", "k"})
		runAll(u, []string{"run", "-v", "-connect-timeout", "1s", "k", "--", "true"})
	}
	runAll(url, []string{"release", "--force", "-v", "k"})
	if code := holder.wait(t, 20*time.Second); code != exitLost {
		t.Errorf("holder after release --force: exit %d, want %d", code, exitLost)
	}
	outs = append(outs, "the holder:\n"+holder.output())
	lost := filepath.Join(t.TempDir(), "lost")
	waiter := start(t, url, append([]string{"run", "-v", "-ttl", "2s", "-grace", "1s", "k2", "--"}, holdCmd(lost, "30")...)...)
	waitFile(t, lost, 20*time.Second)
	_ = srv.Kill()
	if code := waiter.wait(t, 2*time.Second+slack); code != exitLost {
		t.Errorf("holder whose backend died: exit %d, want %d", code, exitLost)
	}
	outs = append(outs, "a holder whose backend died:\n"+waiter.output())
	if all := strings.Join(outs, "\n"); !strings.Contains(all, "app:"+redacted+"@") || !strings.Contains(all, "password="+redacted) {
		t.Errorf("no output names a backend by its redacted URL:\n%s", all)
	}
	for _, out := range outs {
		if strings.Contains(out, secret) {
			t.Errorf("output has the password:\n%s", out)
		}
	}
}

// TestBusyOrUnreachable: on a held key, -n and -w exit 75 while the
// backend answers; once it is gone, waiters (with -w longer than the
// timeout, and without -w) exit 69 within the connect timeout (and
// slack), and the holder loses its hold (76). Neither waiter runs its
// command.
func TestBusyOrUnreachable(t *testing.T) {
	url, srv := aclRedis(t)
	dir := t.TempDir()
	held, ran := filepath.Join(dir, "held"), filepath.Join(dir, "ran")
	holder := start(t, url, append([]string{"run", "-ttl", "2s", "-grace", "1s", "k", "--"}, holdCmd(held, "60")...)...)
	waitFile(t, held, 20*time.Second)
	for _, args := range [][]string{{"run", "-n", "k", "--", "touch", ran}, {"run", "-w", "1s", "k", "--", "touch", ran}} {
		if code, out := lockerCmd(t, url, args...); code != exitBusy || !strings.Contains(out, `"k" `) || strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Errorf("locker %q on a held key: exit %d, want %d and one line; output:\n%s", args, code, exitBusy, out)
		}
	}
	const timeout = testTimeout
	var waiters []*child
	for _, w := range [][]string{nil, {"-w", "10m"}} {
		args := append(append([]string{"run", "-connect-timeout", timeout.String()}, w...), "k", "--", "touch", ran)
		waiters = append(waiters, start(t, url, args...))
	}
	time.Sleep(timeout) // the waiters are waiting (and read the key's state once)
	for _, w := range waiters {
		select {
		case <-w.done:
			t.Fatalf("locker %q ended while the key was held: exit %d; output:\n%s", w.cmd.Args[1:], w.code, w.output())
		default:
		}
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for _, w := range waiters {
		// Up to half a timeout until the next read, then a timeout of
		// failed reads.
		checkBackendFailure(t, w, killed, timeout*3/2, "run")
	}
	if code := holder.wait(t, 2*time.Second+slack); code != exitLost {
		t.Errorf("holder after the server died: exit %d, want %d; output:\n%s", code, exitLost, holder.output())
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("a waiter ran its command without the lock")
	}
}

// TestSignalWhileReaching: a signal that arrives while locker waits for a
// backend that does not answer ends locker at once with 128+N, without
// waiting for the connect timeout.
func TestSignalWhileReaching(t *testing.T) {
	c := start(t, backendURLs(silentAddr(t))["redis"], "run", "-connect-timeout", "1m", "k", "--", "true")
	time.Sleep(500 * time.Millisecond) // let it start and dial (or not yet: the signal ends either)
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	if code := c.wait(t, slack); code != 128+int(syscall.SIGINT) {
		t.Errorf("SIGINT while reaching the backend: exit %d, want %d; output:\n%s", code, 128+int(syscall.SIGINT), c.output())
	}
}
