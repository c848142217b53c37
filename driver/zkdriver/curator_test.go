package zkdriver_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/zkdriver"
	"github.com/go-locker/locker/internal/zktest"
	"github.com/go-zookeeper/zk"
)

// The Curator interop tests run Apache Curator itself (Debian's
// libcurator-recipes-java) next to locker: testdata/CuratorContender.java,
// compiled at test time, in Java processes, and this test binary re-run as
// locker processes (see serveCuratorChild), contending on one ZooKeeper
// path. Every critical section, on either side, runs the same protocol
// over a store directory:
//
//   - a writer creates the file W exclusively (it existing is an overlap),
//     checks that no reader's file R.* exists (an overlap), increments the
//     number in the file counter by a read, a 1 ms pause and a write
//     (rename of a temporary file), and deletes W;
//   - a reader creates its file R.<side>.<pid>.<thread>, checks that W does
//     not exist and that counter does not change during its 1 ms pause
//     (overlaps), notes whether a reader of the other library is in at the
//     same time (shared), and deletes its file.
//
// Lost updates are the writes counted by the processes less the final
// counter.

// curatorJars are the jars of Curator's recipes and what they need, as
// Debian installs them.
var curatorJars = []string{
	"curator-recipes.jar", "curator-framework.jar", "curator-client.jar",
	"zookeeper.jar", "zookeeper-jute.jar", "guava.jar", "slf4j-api.jar", "slf4j-nop.jar",
}

// curatorClasspath compiles testdata/CuratorContender.java into a
// temporary directory and returns the class path that runs it. It skips t
// (fails it under LOCKER_REQUIRE_SERVERS=1) when java, javac or the jars
// are missing.
func curatorClasspath(t *testing.T) string {
	t.Helper()
	var missing []string
	for _, bin := range []string{"java", "javac"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, bin)
		}
	}
	cp := []string{t.TempDir()}
	for _, jar := range curatorJars {
		p := filepath.Join("/usr/share/java", jar)
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
		cp = append(cp, p)
	}
	if len(missing) > 0 {
		zktest.SkipOrFail(t, fmt.Errorf("%w: Apache Curator interop needs %s (Debian: default-jdk-headless libcurator-recipes-java)", zktest.ErrNotInstalled, strings.Join(missing, ", ")))
	}
	src, err := filepath.Abs("testdata/CuratorContender.java")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("javac", "-d", cp[0], "-cp", strings.Join(cp[1:], ":"), src).CombinedOutput()
	if err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	return strings.Join(cp, ":")
}

// contender is one process of an interop run.
type contender struct {
	side  string // "curator" or "locker"
	cmd   *exec.Cmd
	stdin io.WriteCloser // closing it makes a holding Java process release
	out   *bufio.Scanner
	res   result
}

// result is what a contender reports.
type result struct {
	writes, reads, overlaps, shared int64
}

// envCuratorChild, set, makes this test binary a locker contender (see
// serveCuratorChild); its value is the child's arguments, separated by
// spaces: server root key layout threads store side.
const envCuratorChild = "LOCKER_CURATOR_CHILD"

// startContender starts a Java (side "curator") or locker process and
// waits until it reports READY. label names it in the store's files
// (R.<label>…) and in its results.
func startContender(t *testing.T, classpath, side, label, mode, key, store string) *contender {
	t.Helper()
	addr := server(t).Addr
	if side == "curator" {
		return startJava(t, classpath, "READY", addr, "/locker/"+key, mode, "2", store, label, "10000")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envCuratorChild+"="+strings.Join([]string{addr, "/locker", key, mode, "2", store, label}, " "))
	return startProcess(t, cmd, label, "READY")
}

// startJava starts CuratorContender with args and waits until it prints
// the line first.
func startJava(t *testing.T, classpath, first string, args ...string) *contender {
	t.Helper()
	cmd := exec.Command("java", append([]string{"-cp", classpath, "CuratorContender"}, args...)...)
	return startProcess(t, cmd, "curator", first)
}

// startProcess starts cmd and waits until it prints the line first.
func startProcess(t *testing.T, cmd *exec.Cmd, label, first string) *contender {
	t.Helper()
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &contender{side: label, cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	if !c.out.Scan() || c.out.Text() != first {
		t.Fatalf("%s contender: want %s, got %q (%v)", label, first, c.out.Text(), c.out.Err())
	}
	return c
}

// finish reads the contender's RESULT line and waits for it to exit.
func (c *contender) finish(t *testing.T) {
	t.Helper()
	for c.out.Scan() {
		f := strings.Fields(c.out.Text())
		if len(f) == 6 && f[0] == "RESULT" {
			n := make([]int64, 4)
			for i := range n {
				n[i], _ = strconv.ParseInt(f[2+i], 10, 64)
			}
			c.res = result{n[0], n[1], n[2], n[3]}
		}
	}
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("%s contender: %v", c.side, err)
	}
}

// TestCuratorInterop runs 2 locker processes and 2 Curator processes, 2
// goroutines or threads each, for 3 s on one path, for the mutex and the
// read-write lock, and the same runs with 4 Curator processes as the
// control: no overlapping holds, no lost updates, both sides progressing.
// How often readers of two processes were in at once is logged (it
// depends on the schedule); TestCuratorReadersShare checks that they
// share.
func TestCuratorInterop(t *testing.T) {
	server(t)
	cp := curatorClasspath(t)
	for _, run := range []struct {
		name, mode string
		sides      []string
	}{
		{"mutex/curator-only", "mutex", []string{"curator", "curator", "curator", "curator"}},
		{"mutex/mixed", "mutex", []string{"locker", "curator", "locker", "curator"}},
		{"rw/curator-only", "rw", []string{"curator", "curator", "curator", "curator"}},
		{"rw/mixed", "rw", []string{"locker", "curator", "locker", "curator"}},
	} {
		t.Run(run.name, func(t *testing.T) {
			// A key that needs no escaping: its path is /locker/<key>.
			key := "curator-" + strings.ReplaceAll(run.name, "/", "-") + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
			store := t.TempDir()
			var cs []*contender
			for i, side := range run.sides {
				// Curator's side names its process: in the control,
				// "shared" then counts readers of other processes.
				label := side
				if run.sides[0] == "curator" {
					label = fmt.Sprintf("curator%d", i)
				}
				cs = append(cs, startContender(t, cp, side, label, run.mode, key, store))
			}
			end := time.Now().Add(3 * time.Second).UnixMilli()
			writeFileAtomic(t, filepath.Join(store, "GO"), strconv.FormatInt(end, 10))
			var total result
			perSide := map[string]*result{}
			for _, c := range cs {
				c.finish(t)
				kind := strings.TrimRight(c.side, "0123456789")
				s := perSide[kind]
				if s == nil {
					s = new(result)
					perSide[kind] = s
				}
				for _, p := range []*result{&total, s} {
					p.writes += c.res.writes
					p.reads += c.res.reads
					p.overlaps += c.res.overlaps
					p.shared += c.res.shared
				}
			}
			counter := readCounter(t, store)
			lost := total.writes - counter
			for kind, s := range perSide {
				other := "library's" // labels are the libraries' names
				if run.sides[0] == "curator" {
					other = "process's"
				}
				t.Logf("%s: %d write holds, %d read holds (%d with a reader of another %s in)", kind, s.writes, s.reads, s.shared, other)
			}
			t.Logf("holds %d, overlapping holds %d, lost updates %d of %d", total.writes+total.reads, total.overlaps, lost, total.writes)
			if total.overlaps != 0 || lost != 0 {
				t.Errorf("overlapping holds %d, lost updates %d: want 0", total.overlaps, lost)
			}
			for kind, s := range perSide {
				if s.writes == 0 || (run.mode == "rw" && s.reads == 0) {
					t.Errorf("%s made no progress: %+v", kind, *s)
				}
			}
		})
	}
}

// writeFileAtomic writes data to path by a rename, so that readers see
// all of it or nothing.
func writeFileAtomic(t *testing.T, path, data string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func readCounter(t *testing.T, store string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(store, "counter"))
	if errors.Is(err, fs.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// serveCuratorChild runs a locker contender and exits when this test
// binary was started as one (envCuratorChild is set); it returns at once
// otherwise.
func serveCuratorChild() {
	args := os.Getenv(envCuratorChild)
	if args == "" {
		return
	}
	if err := curatorChild(strings.Fields(args)); err != nil {
		fmt.Fprintln(os.Stderr, "locker contender:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

func curatorChild(a []string) error {
	if len(a) != 7 {
		return fmt.Errorf("want 7 arguments, got %q", a)
	}
	addr, root, key, mode, store, side := a[0], a[1], a[2], a[3], a[5], a[6]
	threads, err := strconv.Atoi(a[4])
	if err != nil {
		return err
	}
	layout := zkdriver.LayoutCuratorMutex
	if mode == "rw" {
		layout = zkdriver.LayoutCuratorReadWrite
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := zkdriver.Connect(ctx, []string{addr}, 10*time.Second, &zkdriver.Options{Root: root, Layout: layout}, zk.WithLogInfo(false))
	if err != nil {
		return err
	}
	defer d.Close()
	c := locker.New(d, locker.WithTTL(5*time.Second))
	defer c.Close(ctx)
	fmt.Println("READY")
	end, err := curatorChildStart(store)
	if err != nil {
		return err
	}
	cs := &criticalSection{store: store, side: side}
	var wg sync.WaitGroup
	errs := make(chan error, threads)
	for th := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("%d.%d", os.Getpid(), th)
			if err := curatorChildLoop(ctx, c, cs, key, mode, id, end); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	fmt.Printf("RESULT %s %d %d %d %d\n", side, cs.writes.Load(), cs.reads.Load(), cs.overlaps.Load(), cs.sharedWith.Load())
	return nil
}

// curatorChildStart waits for the parent's GO file and returns the end of
// the run it names (Unix milliseconds).
func curatorChildStart(store string) (int64, error) {
	for {
		b, err := os.ReadFile(filepath.Join(store, "GO"))
		if err == nil {
			return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		}
		time.Sleep(time.Millisecond)
	}
}

// curatorChildLoop is one contender thread of curatorChild: it locks key
// (mode "mutex", or alternately as writer and reader) and runs the
// critical section until end.
func curatorChildLoop(ctx context.Context, c *locker.Client, cs *criticalSection, key, mode, id string, end int64) error {
	for n := 0; time.Now().UnixMilli() < end; n++ {
		write := mode == "mutex" || n%2 == 0
		var h *locker.Hold
		var err error
		switch {
		case mode == "mutex":
			h, err = c.Mutex(key).Acquire(ctx)
		case write:
			h, err = c.RWMutex(key).Acquire(ctx)
		default:
			h, err = c.RWMutex(key).RAcquire(ctx)
		}
		if err != nil {
			return err
		}
		if write {
			err = cs.exclusive(id)
		} else {
			err = cs.shared(id)
		}
		if rerr := h.Release(ctx); err == nil {
			err = rerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// criticalSection is the locker side of the store protocol (see the top
// of this file and testdata/CuratorContender.java).
type criticalSection struct {
	store, side                         string
	writes, reads, overlaps, sharedWith atomic.Int64
}

func (s *criticalSection) exclusive(id string) error {
	w := filepath.Join(s.store, "W")
	f, err := os.OpenFile(w, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	mine := err == nil
	switch {
	case mine:
		f.Close()
	case errors.Is(err, fs.ErrExist):
		s.overlaps.Add(1)
	default:
		return err
	}
	if rs, _ := filepath.Glob(filepath.Join(s.store, "R.*")); len(rs) > 0 {
		s.overlaps.Add(1)
	}
	v, err := s.counter()
	if err != nil {
		return err
	}
	time.Sleep(time.Millisecond)
	tmp := filepath.Join(s.store, "tmp."+s.side+"."+id)
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(v+1, 10)), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(s.store, "counter")); err != nil {
		return err
	}
	if mine {
		if err := os.Remove(w); err != nil {
			return err
		}
	}
	s.writes.Add(1)
	return nil
}

func (s *criticalSection) shared(id string) error {
	r := filepath.Join(s.store, "R."+s.side+"."+id)
	if err := os.WriteFile(r, nil, 0o644); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(s.store, "W")); err == nil {
		s.overlaps.Add(1)
	}
	v, err := s.counter()
	if err != nil {
		return err
	}
	time.Sleep(time.Millisecond)
	rs, _ := filepath.Glob(filepath.Join(s.store, "R.*"))
	for _, p := range rs {
		if !strings.HasPrefix(filepath.Base(p), "R."+s.side+".") {
			s.sharedWith.Add(1)
			break
		}
	}
	if v2, err := s.counter(); err != nil || v2 != v {
		s.overlaps.Add(1)
	}
	if err := os.Remove(r); err != nil {
		return err
	}
	s.reads.Add(1)
	return nil
}

func (s *criticalSection) counter() (int64, error) {
	b, err := os.ReadFile(filepath.Join(s.store, "counter"))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// TestForeignNodesBlock puts nodes that locker did not write in a key's
// queue, in every layout: a Curator mutex node whose data would read as a
// 1 ms lease, and a node of no known format. Each blocks TryAcquire and
// Acquire for as long as it exists (never reclaimed by a TTL from its
// data), and Inspect reports it.
func TestForeignNodesBlock(t *testing.T) {
	const uuid = "0b9a3c2e-6f1d-4e8a-9c7b-2d5e8f1a3b4c"
	for _, layout := range []zkdriver.Layout{zkdriver.LayoutLocker, zkdriver.LayoutCuratorMutex, zkdriver.LayoutCuratorReadWrite} {
		for _, name := range []string{"_c_" + uuid + "-lock-", "member-"} {
			if layout == zkdriver.LayoutLocker && name != "member-" {
				continue // refused: TestCuratorDefaultLayoutRefused
			}
			t.Run(layout.String()+"/"+name, func(t *testing.T) {
				d := connect(t, []string{server(t).Addr}, 10*time.Second, &zkdriver.Options{Layout: layout})
				other := newDriver(t).Conn()
				key := uniqueKey(t, "foreign")
				parent := zkdriver.ParentPath(zkdriver.DefaultRoot, key)
				for _, p := range []string{zkdriver.DefaultRoot, parent} {
					if _, err := other.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
						t.Fatal(err)
					}
				}
				t.Cleanup(func() { _ = other.Delete(parent, -1) })
				path, err := other.Create(parent+"/"+name, []byte("1"), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
				if err != nil {
					t.Fatal(err)
				}
				r := req(key, owner(), driver.Exclusive, 5*time.Second)
				for range 3 {
					var locked *driver.LockedError
					if _, err := d.TryAcquire(ctxT(t), r); !errors.As(err, &locked) {
						t.Fatalf("TryAcquire behind foreign node %s: %v, want a *driver.LockedError", path, err)
					}
					time.Sleep(50 * time.Millisecond) // 50 times the "lease" in its data
				}
				st, err := d.Inspect(ctxT(t), key)
				if err != nil {
					t.Fatal(err)
				}
				if len(st.Holders) != 1 || st.Holders[0].Value != "1" || st.Holders[0].Token == 0 || st.Holders[0].Remaining != 0 {
					t.Errorf("Inspect = %+v, want the foreign node as the one holder", st)
				}
				if owner := st.Holders[0].Owner; (name == "member-" && owner != path[len(parent)+1:]) || (name != "member-" && owner != uuid) {
					t.Errorf("Inspect: foreign holder's owner %q", owner)
				}
				got := make(chan error, 1)
				go func() {
					_, err := d.Acquire(ctxT(t), r)
					got <- err
				}()
				select {
				case err := <-got:
					t.Fatalf("Acquire returned %v while the foreign node exists", err)
				case <-time.After(300 * time.Millisecond):
				}
				if err := other.Delete(path, -1); err != nil {
					t.Fatal(err)
				}
				if err := <-got; err != nil {
					t.Fatalf("Acquire after the foreign node went: %v", err)
				}
			})
		}
	}
}

// TestCuratorDefaultLayoutRefused runs a real Curator holder of a key's
// path (InterProcessMutex, and the read and write locks of an
// InterProcessReadWriteLock) next to a driver in the default layout, which
// Curator does not order (see the package documentation): every request of
// the driver, direct or through the front-end, fails with a permanent
// error wrapping ErrCuratorLayout that names the layouts to use, and leaves
// no node; once Curator released the key, the driver takes it.
func TestCuratorDefaultLayoutRefused(t *testing.T) {
	server(t)
	cp := curatorClasspath(t)
	d := newDriver(t)
	c := locker.New(d, locker.WithTTL(5*time.Second))
	defer c.Close(context.Background())
	for _, mode := range []string{"hold", "rhold", "whold"} {
		key := "curator-default-" + mode + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		java := startJava(t, cp, "HELD", server(t).Addr, "/locker/"+key, mode, "1", t.TempDir(), "curator", "10000")
		check := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, zkdriver.ErrCuratorLayout) || !driver.IsPermanent(err) || !strings.Contains(err.Error(), "LayoutCuratorReadWrite") {
				t.Errorf("%s: %s: %v; want a permanent error wrapping ErrCuratorLayout naming the Curator layouts", mode, what, err)
			}
		}
		for _, m := range []driver.Mode{driver.Exclusive, driver.Shared} {
			r := req(key, owner(), m, 5*time.Second)
			_, err := d.TryAcquire(ctxT(t), r)
			check("TryAcquire "+m.String(), err)
			_, err = d.Acquire(ctxT(t), r)
			check("Acquire "+m.String(), err)
		}
		_, err := c.Mutex(key).TryAcquire(ctxT(t))
		check("Mutex.TryAcquire", err)
		_, err = c.RWMutex(key).RAcquire(ctxT(t))
		check("RWMutex.RAcquire", err)
		names, _, err := d.Conn().Children(zkdriver.ParentPath(zkdriver.DefaultRoot, key))
		if err != nil || len(names) != 1 {
			t.Errorf("%s: children %q (%v); want Curator's node alone", mode, names, err)
		}
		_ = java.stdin.Close()
		java.finish(t)
		h, err := c.Mutex(key).Acquire(ctxT(t))
		if err != nil {
			t.Fatalf("%s: Acquire after Curator's release: %v", mode, err)
		}
		_ = h.Release(ctxT(t))
	}
}

// TestCuratorHolderKilled kills (SIGKILL) a Curator process that holds an
// InterProcessMutex on a key's path with a 2 s session: a locker waiter
// gets the key when ZooKeeper expires the session, not before.
func TestCuratorHolderKilled(t *testing.T) {
	server(t)
	cp := curatorClasspath(t)
	key := "curator-killed-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	const session = 2 * time.Second
	java := startJava(t, cp, "HELD", server(t).Addr, "/locker/"+key, "hold", "1", t.TempDir(), "curator", strconv.Itoa(int(session/time.Millisecond)))
	d := connect(t, []string{server(t).Addr}, 10*time.Second, &zkdriver.Options{Layout: zkdriver.LayoutCuratorMutex})
	c := locker.New(d, locker.WithTTL(5*time.Second))
	defer c.Close(context.Background())
	got := make(chan time.Time, 1)
	go func() {
		h, err := c.Mutex(key).Acquire(ctxT(t))
		if err != nil {
			t.Errorf("Acquire: %v", err)
			close(got)
			return
		}
		got <- time.Now()
		_ = h.Release(context.Background())
	}()
	select {
	case <-got:
		t.Fatal("locker acquired a key Curator holds")
	case <-time.After(time.Second):
	}
	if err := java.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	at, ok := <-got
	if !ok {
		return
	}
	// The session's last heartbeat was at most a third of its timeout
	// before the kill; the server expires it a timeout after that.
	waited := at.Sub(killed)
	t.Logf("locker waiter granted %v after the Curator holder's SIGKILL (session %v)", waited, session)
	if waited < session*2/3 {
		t.Errorf("granted %v after the kill: before the holder's %v session could expire", waited, session)
	}
}

// TestLockerHolderBlackholed black-holes a locker process's holder of an
// InterProcessMutex key (its proxy holds every byte back) while a Curator
// process waits for the key: the holder's loss signal fires, and only
// then, once ZooKeeper expires the holder's session, does Curator get it.
func TestLockerHolderBlackholed(t *testing.T) {
	server(t)
	cp := curatorClasspath(t)
	key := "curator-blackholed-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	const session = 2 * time.Second
	d := newProxiedDriverOpts(t, session, &zkdriver.Options{Layout: zkdriver.LayoutCuratorMutex})
	c := locker.New(d, locker.WithTTL(session))
	defer c.Close(context.Background())
	h, err := c.Mutex(key).Acquire(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	java := startJava(t, cp, "READY", server(t).Addr, "/locker/"+key, "acquire", "1", t.TempDir(), "curator", "10000")
	time.Sleep(500 * time.Millisecond) // Curator's node is in the queue
	stall(t, d)
	cut := time.Now()
	var lost time.Time
	select {
	case <-h.Done():
		lost = time.Now()
	case <-time.After(10 * time.Second):
		t.Fatal("no loss signal 10 s after the holder was cut off")
	}
	if !java.out.Scan() {
		t.Fatalf("Curator: %v", java.out.Err())
	}
	f := strings.Fields(java.out.Text())
	if len(f) != 2 || f[0] != "ACQUIRED" {
		t.Fatalf("Curator printed %q", java.out.Text())
	}
	ms, _ := strconv.ParseInt(f[1], 10, 64)
	acquired := time.UnixMilli(ms)
	t.Logf("holder cut off; loss signal after %v, Curator acquired after %v (session %v)", lost.Sub(cut), acquired.Sub(cut), session)
	if !lost.Before(acquired) {
		t.Errorf("Curator acquired the key %v before the holder's loss signal", lost.Sub(acquired))
	}
	if acquired.Sub(cut) < session*2/3 {
		t.Errorf("Curator acquired %v after the cut: before the holder's %v session could expire", acquired.Sub(cut), session)
	}
	if !errors.Is(h.Err(), locker.ErrLost) {
		t.Errorf("hold's Err() = %v, want ErrLost", h.Err())
	}
}

// TestCuratorReentrant holds a key through a locker ReentrantMutex entered
// twice while a Curator process waits for its InterProcessMutex: the hold
// is one node, as a reentrant InterProcessMutex's is, and Curator gets the
// key after the second Leave, not the first.
func TestCuratorReentrant(t *testing.T) {
	server(t)
	cp := curatorClasspath(t)
	key := "curator-reentrant-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	d := connect(t, []string{server(t).Addr}, 10*time.Second, &zkdriver.Options{Layout: zkdriver.LayoutCuratorMutex})
	c := locker.New(d, locker.WithTTL(5*time.Second))
	defer c.Close(context.Background())
	m := c.ReentrantMutex(key)
	ctx1, err := m.Enter(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx2, err := m.Enter(ctx1)
	if err != nil {
		t.Fatal(err)
	}
	parent := zkdriver.ParentPath(zkdriver.DefaultRoot, key)
	names, _, err := d.Conn().Children(parent)
	if err != nil || len(names) != 1 || !strings.HasSuffix(strings.TrimRight(names[0], "0123456789"), "-lock-") {
		t.Fatalf("a hold entered twice: nodes %q (%v), want one _c_<owner>-lock-<seq>", names, err)
	}
	java := startJava(t, cp, "READY", server(t).Addr, "/locker/"+key, "acquire", "1", t.TempDir(), "curator", "10000")
	acquired := make(chan string, 1)
	go func() {
		java.out.Scan()
		acquired <- java.out.Text()
	}()
	if err := m.Leave(ctx2); err != nil {
		t.Fatal(err)
	}
	select {
	case line := <-acquired:
		t.Fatalf("Curator acquired after the first of two Leaves: %q", line)
	case <-time.After(time.Second):
	}
	if err := m.Leave(ctx1); err != nil {
		t.Fatal(err)
	}
	select {
	case line := <-acquired:
		if !strings.HasPrefix(line, "ACQUIRED ") {
			t.Fatalf("Curator printed %q", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Curator did not acquire after the last Leave")
	}
}

// TestCuratorLayoutRejects checks the requests the Curator layouts cannot
// express: counted ones in both, shared ones in LayoutCuratorMutex. Each
// fails with a permanent error wrapping ErrCuratorLayout and
// errors.ErrUnsupported that names the key, and leaves no node; through
// the front-end a Semaphore fails with ErrCuratorLayout and
// errors.ErrUnsupported before any request.
func TestCuratorLayoutRejects(t *testing.T) {
	server(t)
	for _, tc := range []struct {
		layout zkdriver.Layout
		r      driver.Request
	}{
		{zkdriver.LayoutCuratorMutex, driver.Request{Mode: driver.Shared}},
		{zkdriver.LayoutCuratorMutex, driver.Request{Mode: driver.Shared, Limit: 3, Weight: 1}},
		{zkdriver.LayoutCuratorReadWrite, driver.Request{Mode: driver.Shared, Limit: 3, Weight: 1}},
	} {
		d := connect(t, []string{server(t).Addr}, 10*time.Second, &zkdriver.Options{Layout: tc.layout})
		r := tc.r
		r.Key, r.Owner, r.TTL = uniqueKey(t, "rejects"), owner(), 5*time.Second
		for _, acquire := range []func(context.Context, driver.Request) (driver.Lease, error){d.TryAcquire, d.Acquire} {
			_, err := acquire(ctxT(t), r)
			if !errors.Is(err, zkdriver.ErrCuratorLayout) || !errors.Is(err, errors.ErrUnsupported) || !driver.IsPermanent(err) || !strings.Contains(err.Error(), r.Key) {
				t.Errorf("%v, %+v: %v; want a permanent error wrapping ErrCuratorLayout and errors.ErrUnsupported, naming the key", tc.layout, r, err)
			}
		}
		names, _, err := d.Conn().Children(zkdriver.ParentPath(zkdriver.DefaultRoot, r.Key))
		if len(names) != 0 || (err != nil && !errors.Is(err, zk.ErrNoNode)) {
			t.Errorf("%v: nodes %q left (%v)", tc.layout, names, err)
		}
		if d.Capabilities().Counted {
			t.Errorf("%v: Capabilities report counted holds", tc.layout)
		}
		c := locker.New(d, locker.WithTTL(5*time.Second))
		for _, try := range []func() error{
			func() error { _, err := c.Semaphore(r.Key, 3).TryAcquire(ctxT(t), 1); return err },
			func() error { _, err := c.Semaphore(r.Key, 3).Acquire(ctxT(t), 1); return err },
		} {
			if err := try(); !errors.Is(err, zkdriver.ErrCuratorLayout) || !errors.Is(err, errors.ErrUnsupported) {
				t.Errorf("%v: Semaphore: %v, want ErrCuratorLayout and errors.ErrUnsupported", tc.layout, err)
			}
		}
		_ = c.Close(context.Background())
	}
}

// TestCuratorReadersShare checks, without timing luck, that readers share
// across the libraries and writers exclude them: a locker reader gets the
// key while a Curator reader holds it and a locker writer does not; a
// Curator reader gets it while a locker reader holds it and a Curator
// writer only after the locker reader's release.
func TestCuratorReadersShare(t *testing.T) {
	server(t)
	cp := curatorClasspath(t)
	key := "curator-share-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	path := "/locker/" + key
	d := connect(t, []string{server(t).Addr}, 10*time.Second, &zkdriver.Options{Layout: zkdriver.LayoutCuratorReadWrite})
	c := locker.New(d, locker.WithTTL(5*time.Second))
	defer c.Close(context.Background())
	rw := c.RWMutex(key)

	curatorReader := startJava(t, cp, "HELD", server(t).Addr, path, "rhold", "1", t.TempDir(), "curator", "10000")
	h, err := rw.TryRAcquire(ctxT(t))
	if err != nil {
		t.Fatalf("locker reader while a Curator reader holds: %v", err)
	}
	if _, err := c.RWMutex(key).TryAcquire(ctxT(t)); !errors.Is(err, locker.ErrLocked) {
		t.Fatalf("locker writer while readers of both hold: %v, want ErrLocked", err)
	}
	curatorReader.stdin.Close() // it releases and exits
	if err := curatorReader.cmd.Wait(); err != nil {
		t.Fatalf("Curator reader: %v", err)
	}

	awaitLine := func(j *contender) <-chan string {
		ch := make(chan string, 1)
		go func() {
			j.out.Scan()
			ch <- j.out.Text()
		}()
		return ch
	}
	reader := awaitLine(startJava(t, cp, "READY", server(t).Addr, path, "racquire", "1", t.TempDir(), "curator", "10000"))
	select {
	case line := <-reader:
		if !strings.HasPrefix(line, "ACQUIRED ") {
			t.Fatalf("Curator reader printed %q", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a Curator reader did not get the key while a locker reader held it")
	}
	writer := awaitLine(startJava(t, cp, "READY", server(t).Addr, path, "wacquire", "1", t.TempDir(), "curator", "10000"))
	select {
	case line := <-writer:
		t.Fatalf("a Curator writer got the key while a locker reader held it: %q", line)
	case <-time.After(time.Second):
	}
	if err := h.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case line := <-writer:
		if !strings.HasPrefix(line, "ACQUIRED ") {
			t.Fatalf("Curator writer printed %q", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Curator writer did not get the key after the locker reader's release")
	}
}

// TestCuratorLeaderSelector runs a Curator LeaderSelector (an
// InterProcessMutex on its path) against a locker Election on the key in
// LayoutCuratorMutex: while Curator leads, Campaign waits and Leader
// reports Curator's node (its data, the client's IP, as the value; its
// czxid as the term); once Curator gives leadership up, Campaign wins.
func TestCuratorLeaderSelector(t *testing.T) {
	server(t)
	cp := curatorClasspath(t)
	key := "curator-leader-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	java := startJava(t, cp, "LEADING", server(t).Addr, "/locker/"+key, "lead", "1", t.TempDir(), "curator", "10000")
	d := connect(t, []string{server(t).Addr}, 10*time.Second, &zkdriver.Options{Layout: zkdriver.LayoutCuratorMutex})
	c := locker.New(d, locker.WithTTL(5*time.Second))
	defer c.Close(context.Background())
	e := c.Election(key)
	leader, err := e.Leader(ctxT(t))
	if err != nil || leader.Term == 0 || leader.Value == "" {
		t.Fatalf("Leader while Curator leads: %+v, %v", leader, err)
	}
	won := make(chan error, 1)
	go func() {
		h, err := e.Campaign(ctxT(t), "go")
		if err == nil {
			err = h.Release(context.Background())
		}
		won <- err
	}()
	select {
	case err := <-won:
		t.Fatalf("Campaign returned (%v) while Curator leads", err)
	case <-time.After(time.Second):
	}
	java.stdin.Close() // Curator gives leadership up
	select {
	case err := <-won:
		if err != nil {
			t.Fatalf("Campaign: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Campaign did not win after Curator gave leadership up")
	}
}

// TestCuratorLayoutsOneConnection serves keys of both Curator recipes by
// two Drivers over one connection, as the package documentation
// suggests: each names its nodes by its own layout.
func TestCuratorLayoutsOneConnection(t *testing.T) {
	sess := new(zkdriver.Session)
	conn, _, err := zk.Connect([]string{server(t).Addr}, 10*time.Second, sess.ConnOption(), quiet(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	for layout, marker := range map[zkdriver.Layout]string{zkdriver.LayoutCuratorMutex: "-lock-", zkdriver.LayoutCuratorReadWrite: "-__WRIT__"} {
		d, err := zkdriver.New(conn, sess, &zkdriver.Options{Layout: layout})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		if err := sess.Wait(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		r := req(uniqueKey(t, layout.String()), owner(), driver.Exclusive, 5*time.Second)
		l := mustAcquire(t, d, r)
		names, _, err := conn.Children(zkdriver.ParentPath(zkdriver.DefaultRoot, r.Key))
		if err != nil || len(names) != 1 || !strings.HasPrefix(names[0], "_c_"+r.Owner+marker) {
			t.Errorf("%v: nodes %q (%v), want _c_<owner>%s<seq>", layout, names, err, marker)
		}
		if err := d.Release(ctxT(t), l); err != nil {
			t.Fatal(err)
		}
	}
}
