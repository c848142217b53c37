package main

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// userMain is the program built in the fresh module (testdata/user).
//
//go:embed testdata/user/main.go
var userMain []byte

// install runs go install of the command at the release version outside
// any module, as the README tells users to, and runs the binary.
func (c *check) install() {
	home := filepath.Join(c.tmp, "home") // no go.mod here or above
	if err := os.MkdirAll(home, 0o777); err != nil {
		c.fail("%v", err)
		return
	}
	if _, ok := c.goCmd(home, nil, "install", rootPath+"/cmd/locker@"+c.version); !ok {
		return
	}
	bin := filepath.Join(c.tmp, "bin", "locker")
	out, _ := c.run(home, c.env(), bin, "-h") // its exit status is the CLI's business
	if !strings.Contains(out, "usage") {
		c.fail("%s -h printed no usage:\n%s", bin, out)
	}
	c.builtFrom(bin, rootPath)
}

// user makes a fresh module, go gets the root module's packages the
// program imports and every published submodule, builds and runs the
// program, and builds every package of each submodule.
func (c *check) user() {
	dir := filepath.Join(c.tmp, "user")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		c.fail("%v", err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), userMain, 0o666); err != nil {
		c.fail("%v", err)
		return
	}
	modMod := []string{"GOFLAGS=-trimpath -mod=mod"}
	if _, ok := c.goCmd(dir, nil, "mod", "init", "example.com/lockeruser"); !ok {
		return
	}
	get := []string{"get", rootPath + "@" + c.version}
	for _, p := range []string{"driver/memdriver", "driver/redisdriver", "driver/zkdriver"} {
		get = append(get, rootPath+"/"+p+"@"+c.version)
	}
	var subs []string
	for _, m := range c.mods {
		if m.published && m.dir != "." {
			get = append(get, m.path()+"@"+c.version)
			subs = append(subs, m.path())
		}
	}
	if _, ok := c.goCmd(dir, modMod, get...); !ok {
		return
	}
	bin := filepath.Join(c.tmp, "bin", "user")
	if _, ok := c.goCmd(dir, modMod, "build", "-o", bin, "."); !ok {
		return
	}
	out, err := c.run(dir, c.env(), bin)
	if err != nil || !strings.Contains(out, "locked installcheck") || !strings.Contains(out, "made a redisdriver and a zkdriver") {
		c.fail("the program built from testdata/user did not do its work (%v):\n%s", err, out)
	} else {
		fmt.Printf("   %s", strings.ReplaceAll(out, "\n", "\n   "))
		fmt.Println()
	}
	// What users build against is what the root module's tests ran with:
	// every module in the program at the version, and with the
	// replacement (none), that the root module's build list has.
	if vers := c.builtFrom(bin, rootPath, rootPath+"/otel"); vers != nil {
		if root := c.buildList(c.repo, c.env()); root != nil {
			c.sameVersions("the user's program has", vers, "the root module (what CI tests)", root)
		}
	}
	for _, p := range subs {
		c.goCmd(dir, modMod, "build", p+"/...")
	}
}

// builtFrom checks, by go version -m, that bin was built from the packed
// zips of the modules named: the release version with the packed hash. It
// returns the modules bin was built from, as buildList does.
func (c *check) builtFrom(bin string, paths ...string) map[string]string {
	out, err := c.run(c.tmp, c.env(), "go", "version", "-m", bin)
	if err != nil {
		c.fail("%v", err)
		return nil
	}
	vers := map[string]string{} // path -> "version" or "version => replacement"
	sums := map[string]string{} // path -> "version sum"
	last := ""
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && (f[0] == "mod" || f[0] == "dep"):
			last = f[1]
			vers[last] = f[2]
			if len(f) >= 4 {
				sums[last] = f[2] + " " + f[3]
			}
		case len(f) >= 2 && f[0] == "=>" && last != "":
			vers[last] += " => " + strings.Join(f[1:min(3, len(f))], " ")
		}
	}
	for _, p := range paths {
		want, ok := c.hashes[p]
		if !ok {
			continue // not packed (not published): nothing to compare
		}
		if sums[p] != c.version+" "+want {
			c.fail("%s was built from %s %q, not from the packed %s %s", filepath.Base(bin), p, sums[p], c.version, want)
		}
	}
	return vers
}
