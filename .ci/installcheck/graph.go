package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
)

// userGoLine is the go line of the fresh user modules of the graph step: a
// service that has not moved to the newest Go.
const userGoLine = "1.24"

// graph checks, for every published driver module, that the module graph a
// user gets by go get of the root module and that driver is the graph of
// the modules the driver's packages import (its client) plus locker's own
// modules: nothing that only locker's tests need, no version the client
// alone would not select, and no higher go line than the client alone
// leaves. It prints both graphs' sizes and go lines.
func (c *check) graph() {
	for _, m := range c.mods {
		if !m.published || !strings.HasPrefix(m.dir, "driver/") {
			continue
		}
		imported, err := c.importedModules(m)
		if err != nil {
			c.fail("%v", err)
			continue
		}
		name := filepath.Base(m.dir)
		with, goWith, ok := c.userGraph("with-"+name, []string{rootPath + "@" + c.version, m.path() + "@" + c.version})
		if !ok {
			continue
		}
		var gets []string
		for _, p := range imported {
			gets = append(gets, p+"@"+with[p])
		}
		alone, goAlone, ok := c.userGraph("alone-"+name, gets)
		if !ok {
			continue
		}
		for p, v := range with {
			if isOurs(p) {
				continue
			}
			if av, ok := alone[p]; !ok {
				c.fail("a user of %s gets %s %s, which its client (%s) does not need", m.path(), p, v, strings.Join(imported, ", "))
			} else if av != v {
				c.fail("a user of %s gets %s %s, where its client alone selects %s", m.path(), p, v, av)
			}
		}
		if goWith != goAlone {
			c.fail("a go %s user of %s gets go %s, where its client alone leaves go %s", userGoLine, m.path(), goWith, goAlone)
		}
		fmt.Printf("   %s: %d modules (its client alone: %d), go %s (client alone: go %s) from go %s\n",
			m.dir, len(with), len(alone), goWith, goAlone, userGoLine)
	}
}

// importedModules lists the modules, other than ours, that provide the
// packages m's packages import when built (not tested), in the workspace.
func (c *check) importedModules(m *repoModule) ([]string, error) {
	dir := filepath.Join(c.repo, filepath.FromSlash(m.dir))
	env := append(os.Environ(), "GOWORK="+filepath.Join(c.repo, "go.work"), "GOFLAGS=")
	out, err := c.run(dir, env, "go", "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", "./...")
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, p := range strings.Fields(out) {
		if !isOurs(p) {
			set[p] = true
		}
	}
	var mods []string
	for p := range set {
		mods = append(mods, p)
	}
	sort.Strings(mods)
	return mods, nil
}

// userGraph makes a fresh module at go userGoLine, runs go get of gets in
// it and returns go list -m all (path → version) and its go line after.
func (c *check) userGraph(name string, gets []string) (map[string]string, string, bool) {
	dir := filepath.Join(c.tmp, "graph", name)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		c.fail("%v", err)
		return nil, "", false
	}
	mod := "module example.com/" + name + "\n\ngo " + userGoLine + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o666); err != nil {
		c.fail("%v", err)
		return nil, "", false
	}
	env := c.env("GOTOOLCHAIN=local")
	if len(gets) > 0 {
		if _, err := c.run(dir, env, "go", append([]string{"get"}, gets...)...); err != nil {
			c.fail("%v", err)
			return nil, "", false
		}
	}
	out, err := c.run(dir, env, "go", "list", "-m", "-f", "{{.Path}} {{.Version}}", "all")
	if err != nil {
		c.fail("%v", err)
		return nil, "", false
	}
	vs := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if p, v, ok := strings.Cut(line, " "); ok && v != "" {
			vs[p] = v
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		c.fail("%v", err)
		return nil, "", false
	}
	f, err := modfile.Parse("go.mod", data, nil)
	if err != nil || f.Go == nil {
		c.fail("%s/go.mod: %v", name, err)
		return nil, "", false
	}
	return vs, f.Go.Version, true
}
