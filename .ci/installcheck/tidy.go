package main

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// tidy runs go mod tidy -diff in every module with GOWORK=off: the
// submodules find the root module at the release version in the packed
// proxy. The go.sum lines of that version are left out of the verdict:
// its hash is known only once it is tagged (then the submodules' go.sum
// get them, see RELEASING.md). With -tidy, it runs go mod tidy instead,
// which rewrites the files, and then drops those lines from go.sum.
func (c *check) tidy() {
	for _, m := range c.mods {
		dir := filepath.Join(c.repo, filepath.FromSlash(m.dir))
		if c.write {
			fmt.Printf("   $ go mod tidy   (in %s)\n", m.dir)
			if _, err := c.run(dir, c.env(), "go", "mod", "tidy"); err != nil {
				c.fail("%v", err)
			} else if err := c.dropRootSums(filepath.Join(dir, "go.sum")); err != nil {
				c.fail("%v", err)
			}
			continue
		}
		fmt.Printf("   $ go mod tidy -diff   (in %s)\n", m.dir)
		out, err := c.run(dir, c.env(), "go", "mod", "tidy", "-diff")
		var diff []string
		for _, line := range strings.Split(out, "\n") {
			if !strings.HasPrefix(line, "+") && !strings.HasPrefix(line, "-") ||
				strings.HasPrefix(line, "+++") || strings.HasPrefix(line, "---") {
				continue
			}
			f := strings.Fields(line[1:])
			if len(f) >= 2 && isOurs(f[0]) && strings.TrimSuffix(f[1], "/go.mod") == c.version {
				continue // an untagged module's hash
			}
			diff = append(diff, line)
		}
		switch {
		case len(diff) > 0:
			c.fail("%s is not tidy (go mod tidy -diff):\n%s", path.Join(m.dir, "go.mod"), strings.Join(diff, "\n"))
		case err != nil && !strings.Contains(out, "diff "):
			c.fail("%v", err) // tidy itself failed
		}
	}
}

// dropRootSums removes the go.sum lines of the root module at the
// release version, which hold the hash of the packed zip, not of the tag.
func (c *check) dropRootSums(name string) error {
	data, err := os.ReadFile(name)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var keep []string
	for _, line := range strings.SplitAfter(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && isOurs(f[0]) && strings.TrimSuffix(f[1], "/go.mod") == c.version {
			continue
		}
		keep = append(keep, line)
	}
	return os.WriteFile(name, []byte(strings.Join(keep, "")), 0o666)
}

// workspace checks that go.work selects, for every direct requirement of
// each published module (the client a driver is written against), the
// version that module's go.mod alone selects (with the packed proxy for
// our untagged modules): a workspace module requiring a newer client
// (bench's peers, integration's test servers) would otherwise make CI test
// a driver against a client its users never get. Indirect requirements
// may differ (the workspace is one build list for every module; otel's
// module raises OpenTelemetry for all): their count is printed.
func (c *check) workspace() {
	wsEnv := append(os.Environ(), "GOWORK="+filepath.Join(c.repo, "go.work"), "GOFLAGS=")
	for _, m := range c.mods {
		if !m.published {
			continue
		}
		dir := filepath.Join(c.repo, filepath.FromSlash(m.dir))
		alone := c.buildList(dir, c.aloneEnv(m))
		ws := c.buildList(dir, wsEnv)
		if alone == nil || ws == nil {
			continue
		}
		direct := map[string]string{}
		indirect := 0
		for _, r := range m.file.Require {
			if !r.Indirect {
				direct[r.Mod.Path] = alone[r.Mod.Path]
			}
		}
		for p, v := range alone {
			if _, ok := direct[p]; !ok && ws[p] != v && !isOurs(p) {
				indirect++
			}
		}
		c.sameVersions("the workspace selects", ws, m.dir+"'s go.mod alone", direct)
		fmt.Printf("   %s: its %d direct requirements as alone; %d of %d indirect ones raised by the workspace\n",
			m.dir, len(direct), indirect, len(alone)-len(direct))
	}
}

// aloneEnv is a user's environment for m's own go.mod, through a copy
// of it and its go.sum (-modfile) that the go command may complete with
// the hashes of our packed, untagged modules.
func (c *check) aloneEnv(m *repoModule) []string {
	base := filepath.Join(c.tmp, "alone-"+strings.ReplaceAll(m.dir, "/", "-"))
	dir := filepath.Join(c.repo, filepath.FromSlash(m.dir))
	_ = os.WriteFile(base+".mod", m.data, 0o666)
	if sum, err := os.ReadFile(filepath.Join(dir, "go.sum")); err == nil {
		_ = os.WriteFile(base+".sum", sum, 0o666)
	}
	return c.env("GOFLAGS=-mod=mod -modfile=" + base + ".mod")
}

// buildList returns go list -m all in dir: each module's path and its
// version, followed by " => " and its replacement if it has one.
func (c *check) buildList(dir string, env []string) map[string]string {
	out, err := c.run(dir, env, "go", "list", "-m", "-f",
		"{{.Path}} {{.Version}}{{with .Replace}} => {{.Path}} {{.Version}}{{end}}", "all")
	if err != nil {
		c.fail("%v", err)
		return nil
	}
	vs := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if p, v, ok := strings.Cut(line, " "); ok {
			vs[p] = strings.TrimSpace(v)
		}
	}
	return vs
}

// sameVersions fails the check for every module, other than ours, that
// both build lists have at different versions or replacements.
func (c *check) sameVersions(name string, got map[string]string, wantName string, want map[string]string) {
	for p, w := range want {
		if g, ok := got[p]; ok && g != w && p != rootPath && !strings.HasPrefix(p, rootPath+"/") {
			c.fail("%s %s %s, %s %s", name, p, g, wantName, w)
		}
	}
}
