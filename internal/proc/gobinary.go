package proc

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
)

// ErrNoGoServer is wrapped by the error of [GoBinary] when a server
// program cannot be built (no go command, or the module proxy cannot be
// reached): the test skips, unless LOCKER_REQUIRE_SERVERS=1.
var ErrNoGoServer = errors.New("server program cannot be built here")

var goBinaries sync.Map // name → *goBinary

type goBinary struct {
	once sync.Once
	path string
	err  error
}

// GoBinary returns the path of the server program kept in the unpublished
// module servers/<name> of this repository (etcd, FerretDB and
// nats-server are Go programs whose dependencies must never reach a user's
// module graph, so they are servers run as binaries like every other
// one). The first call in a machine builds it with GOWORK=off into the
// user's cache directory, keyed by a hash of the module's files, under a
// file lock shared by the test binaries that run at once; later calls and
// later runs find it there.
func GoBinary(name string) (string, error) {
	v, _ := goBinaries.LoadOrStore(name, new(goBinary))
	b := v.(*goBinary)
	b.once.Do(func() { b.path, b.err = buildGoBinary(name) })
	return b.path, b.err
}

// serversDir is the directory of the repository's servers/ folder, found
// from this file's path at build time.
func serversDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "servers")
}

func buildGoBinary(name string) (string, error) {
	src := filepath.Join(serversDir(), name)
	sum, err := hashDir(src)
	if err != nil {
		return "", fmt.Errorf("server program %s: %w", name, err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "locker-servers")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("server program %s: %w", name, err)
	}
	bin := filepath.Join(dir, name+"-"+sum[:16])
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	unlock, err := lockFile(bin + ".lock")
	if err != nil {
		return "", fmt.Errorf("server program %s: %w", name, err)
	}
	defer unlock()
	if _, err := os.Stat(bin); err == nil { // built while we waited
		return bin, nil
	}
	return bin, goBuild(name, src, bin)
}

// goBuild builds the main package in src to bin, through a temporary
// file so that bin exists only when complete.
func goBuild(name, src, bin string) error {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, serr := os.Stat(goCmd); serr != nil {
			return fmt.Errorf("server program %s: no go command: %w", name, ErrNoGoServer)
		}
	}
	tmp := bin + ".tmp"
	cmd := exec.Command(goCmd, "build", "-o", tmp, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly", "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		_ = os.Remove(tmp)
		if len(out) > 2000 {
			out = out[len(out)-2000:]
		}
		return fmt.Errorf("server program %s: go build in %s: %v\n%s: %w", name, src, err, out, ErrNoGoServer)
	}
	return os.Rename(tmp, bin)
}

// hashDir hashes the names and contents of the files under dir.
func hashDir(dir string) (string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	h := sha256.New()
	h.Write([]byte(runtime.Version()))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(dir, f)
		fmt.Fprintf(h, "%s %d\n", rel, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
