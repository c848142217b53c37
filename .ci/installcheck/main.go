// Command installcheck proves that locker's modules install the way users
// meet them once they are tagged, before any tag exists. It
//
//  1. reads the modules from the repository's go.work (the one list of the
//     repository's modules; every go.mod in the tree must be in it) and
//     checks that each published one (all but bench and integration) has a
//     go.mod a user's go command accepts: no replace or exclude, its path
//     under the root module's, our modules required at the release
//     version, a go line that names no patch release (the root's at most
//     1.24);
//  2. packs each published module at that version with golang.org/x/mod/zip,
//     as the module proxy does, into a file:// proxy (the layout of
//     GOPROXY's protocol: @v/list, .info, .mod, .zip);
//  3. with GOWORK=off, a fresh GOMODCACHE and GOPROXY=file://<packed>,
//     then the local module download cache, then the usual GOPROXY (the
//     download cache holds the bytes the usual proxy served, checked by
//     go.sum and the checksum database: it only saves the network),
//     runs go install github.com/go-locker/locker/cmd/locker@<version>
//     and runs the binary; then, in a fresh module, go get of the root
//     module, drivers and every published submodule, builds and runs
//     testdata/user (a program that uses them) and builds every package
//     of each submodule; it checks that the builds used the packed zips;
//  4. for each driver module, compares the module graph of a fresh user
//     module at go 1.24 after go get of the root and that driver with the
//     graph of the client the driver imports alone: only locker's modules
//     may be added, at no version the client would not select;
//  5. checks that every module is tidy (go mod tidy -diff with GOWORK=off;
//     the submodules resolve our modules from the packed proxy, and the
//     go.sum lines of the untagged versions are left out), and that the
//     workspace selects, for every direct requirement of each published
//     module, the version its go.mod alone selects (so that the tests run
//     in the workspace test the clients users get).
//
// It reports every failure and exits 1 if there was one. Run it from its
// directory (.ci/run does):
//
//	cd .ci/installcheck && GOWORK=off go run . -repo ../..
//
// go mod tidy of a submodule fails in the repository before the root
// module is tagged (it ignores go.work and asks the proxy for the root's
// version); -tidy runs it in every module with the packed root instead,
// leaving the root's go.sum lines out.
//
// Our modules are not in the checksum database before their tag:
// GONOSUMDB names them; the dependencies are checked as usual.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// rootPath is the root module's path: every published module is under it.
const rootPath = "github.com/go-locker/locker"

// notPublished are the go.work modules that are not for users: not packed,
// not installed, and free to keep what they need in their go.mod.
var notPublished = map[string]bool{"bench": true, "integration": true}

type check struct {
	repo    string // the repository's top directory
	version string // the version every published module is packed at
	tmp     string // the temporary directory: proxy/, modcache/, bin/, user/
	mods    []*repoModule
	write   bool              // -tidy: tidy the modules rather than check them
	proxy   string            // GOPROXY of the user's go commands
	hashes  map[string]string // module path -> h1: hash of its packed zip
	failed  []string
}

func main() {
	repo := flag.String("repo", "../..", "the repository's top directory")
	version := flag.String("version", "v0.1.0", "the version to pack the published modules at")
	keep := flag.Bool("keep", false, "keep the temporary directory (printed) for a look")
	write := flag.Bool("tidy", false, "run go mod tidy in every module (the submodules see the packed root) instead of checking")
	flag.Parse()
	abs, err := filepath.Abs(*repo)
	if err != nil {
		fatal(err)
	}
	tmp, err := os.MkdirTemp("", "installcheck-")
	if err != nil {
		fatal(err)
	}
	c := &check{repo: abs, version: *version, tmp: tmp, write: *write, hashes: map[string]string{}}
	c.proxy = c.goproxy()
	defer c.cleanUp(*keep)

	c.step("modules in go.work, published go.mod files", c.modules)
	c.step("pack the published modules at "+c.version, c.pack)
	if len(c.hashes) > 0 {
		c.step("go install "+rootPath+"/cmd/locker@"+c.version, c.install)
		c.step("go get and build in a fresh module", c.user)
		c.step("a driver's users get its client's module graph and locker's modules, nothing else", c.graph)
		tidy := "go mod tidy -diff of every module"
		if c.write {
			tidy = "go mod tidy of every module"
		}
		c.step(tidy, c.tidy)
	}
	c.step("the workspace selects the clients each published module requires", c.workspace)
	if len(c.failed) > 0 {
		fmt.Printf("\ninstallcheck: %d failure(s):\n", len(c.failed))
		for _, f := range c.failed {
			fmt.Println("  -", strings.ReplaceAll(f, "\n", "\n    "))
		}
		c.cleanUp(*keep)
		os.Exit(1)
	}
	fmt.Println("\ninstallcheck: ok")
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "installcheck:", err)
	os.Exit(2)
}

// step runs one step, printing its name and how long it took.
func (c *check) step(name string, f func()) {
	fmt.Printf("== %s\n", name)
	start := time.Now()
	n := len(c.failed)
	f()
	verdict := "ok"
	if len(c.failed) > n {
		verdict = "FAILED"
	}
	fmt.Printf("   %s (%.1fs)\n", verdict, time.Since(start).Seconds())
}

func (c *check) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	fmt.Println("   FAIL:", strings.ReplaceAll(msg, "\n", "\n         "))
	c.failed = append(c.failed, msg)
}

// cleanUp removes the temporary directory unless keep; the fresh module
// cache's files are read-only, so go clean -modcache empties it first.
func (c *check) cleanUp(keep bool) {
	if c.tmp == "" {
		return
	}
	if keep {
		fmt.Println("kept", c.tmp)
	} else {
		if _, err := os.Stat(filepath.Join(c.tmp, "modcache")); err == nil {
			_, _ = c.run(c.tmp, c.env(), "go", "clean", "-modcache")
		}
		_ = os.RemoveAll(c.tmp)
	}
	c.tmp = ""
}

// env is the environment of a user's go command: GOWORK=off, a fresh
// module cache, our packed modules first in GOPROXY and out of GOSUMDB.
// extra are added last (later entries win).
func (c *check) env(extra ...string) []string {
	set := map[string]bool{}
	for _, k := range []string{"GOWORK", "GOFLAGS", "GOPROXY", "GONOSUMDB", "GONOPROXY",
		"GOPRIVATE", "GOINSECURE", "GOMODCACHE", "GOBIN", "GOTOOLCHAIN"} {
		set[k] = true
	}
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !set[k] {
			env = append(env, kv)
		}
	}
	env = append(env,
		"GOWORK=off",
		"GOTOOLCHAIN=local",
		"GOFLAGS=-trimpath", // the fresh cache's paths must not defeat the build cache
		"GOPROXY="+c.proxy,
		"GONOSUMDB="+rootPath,
		"GOMODCACHE="+filepath.Join(c.tmp, "modcache"),
		"GOBIN="+filepath.Join(c.tmp, "bin"),
	)
	return append(env, extra...)
}

// goproxy is the packed proxy, then the module download cache (when there
// is one), then the GOPROXY this process was given.
func (c *check) goproxy() string {
	list := []string{"file://" + filepath.ToSlash(filepath.Join(c.tmp, "proxy"))}
	if dl := goEnv("GOMODCACHE"); dl != "" {
		dl = filepath.Join(dl, "cache", "download")
		if _, err := os.Stat(dl); err == nil {
			list = append(list, "file://"+filepath.ToSlash(dl))
		}
	}
	if p := goEnv("GOPROXY"); p != "" {
		list = append(list, p)
	}
	return strings.Join(list, ",")
}

func goEnv(key string) string {
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// run runs a command in dir with env, returning its combined output.
func (c *check) run(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%s %s (in %s): %v\n%s", name, strings.Join(args, " "), dir, err, strings.TrimSpace(out.String()))
	}
	return out.String(), err
}

// goCmd runs go with a user's environment in dir, failing the check with
// its output if it fails; extra is added to the environment.
func (c *check) goCmd(dir string, extra []string, args ...string) (string, bool) {
	fmt.Printf("   $ go %s\n", strings.Join(args, " "))
	out, err := c.run(dir, c.env(extra...), "go", args...)
	if err != nil {
		c.fail("%v", err)
		return out, false
	}
	return out, true
}
