package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/sumdb/dirhash"
	modzip "golang.org/x/mod/zip"
)

// A repoModule is one of the repository's modules, as go.work lists it.
type repoModule struct {
	dir       string // relative to the repository, slash-separated: ".", "otel"
	file      *modfile.File
	data      []byte // the go.mod file
	published bool
}

func (m *repoModule) path() string { return m.file.Module.Mod.Path }

// modules reads go.work's modules, checks that every go.mod in the tree is
// one of them, and checks the published ones' go.mod files.
func (c *check) modules() {
	data, err := os.ReadFile(filepath.Join(c.repo, "go.work"))
	if err != nil {
		c.fail("%v", err)
		return
	}
	work, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		c.fail("%v", err)
		return
	}
	listed := map[string]bool{}
	for _, u := range work.Use {
		dir := path.Clean(filepath.ToSlash(u.Path))
		listed[dir] = true
		m, err := readModule(c.repo, dir)
		if err != nil {
			c.fail("go.work uses %s: %v", u.Path, err)
			continue
		}
		m.published = !notPublished[dir]
		c.mods = append(c.mods, m)
		note := ""
		if !m.published {
			note = " (not published)"
		}
		fmt.Printf("   %-10s %s%s\n", dir, m.path(), note)
	}
	for _, dir := range c.goModDirs() {
		if !listed[dir] {
			c.fail("%s/go.mod is not in go.work: add it (go work use ./%s) so that it is developed, packed and installed with the others", dir, dir)
		}
	}
	for _, m := range c.mods {
		if m.published {
			c.checkGoMod(m)
		}
	}
}

func readModule(repo, dir string) (*repoModule, error) {
	name := filepath.Join(repo, filepath.FromSlash(dir), "go.mod")
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	f, err := modfile.Parse(name, data, nil)
	if err != nil {
		return nil, err
	}
	if f.Module == nil {
		return nil, fmt.Errorf("%s has no module directive", name)
	}
	return &repoModule{dir: dir, file: f, data: data}, nil
}

// goModDirs lists the directories with a go.mod, as the go command sees
// them: directories whose names begin with . or _, and testdata, are
// skipped (so is .ci/installcheck, this tool's own module), and so is
// servers/, whose modules build the tests' server programs
// (internal/proc.GoBinary) and stay out of the workspace so that their
// dependencies never raise a version the published modules select.
func (c *check) goModDirs() []string {
	var dirs []string
	_ = filepath.WalkDir(c.repo, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && p != c.repo && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() && p == filepath.Join(c.repo, "servers") {
			return filepath.SkipDir // server programs for the tests: kept out of go.work on purpose
		}
		if !d.IsDir() && d.Name() == "go.mod" {
			rel, _ := filepath.Rel(c.repo, filepath.Dir(p))
			dirs = append(dirs, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(dirs)
	return dirs
}

// checkGoMod checks what a user's go command needs of a published go.mod:
// no replace or exclude (go install pkg@version refuses them, and go get
// ignores them, so users would build something else than we test), the
// path its directory gives it under the root module, and, for submodules,
// the root module required at the release version.
func (c *check) checkGoMod(m *repoModule) {
	name := path.Join(m.dir, "go.mod")
	if len(m.file.Replace) > 0 || len(m.file.Exclude) > 0 {
		c.fail("%s has %d replace and %d exclude directive(s): a user's go command would refuse or ignore them", name, len(m.file.Replace), len(m.file.Exclude))
	}
	want := rootPath
	if m.dir != "." {
		want = rootPath + "/" + m.dir
	}
	if m.path() != want {
		c.fail("%s declares module %s; in directory %s of %s's repository it must be %s", name, m.path(), m.dir, rootPath, want)
	}
	c.checkGoLine(m)
	if m.dir == "." {
		return
	}
	for _, r := range m.file.Require {
		if isOurs(r.Mod.Path) && r.Mod.Version != c.version {
			c.fail("%s requires %s %s, not the release version %s", name, r.Mod.Path, r.Mod.Version, c.version)
		}
	}
}

// isOurs reports whether path is one of this repository's modules.
func isOurs(path string) bool { return path == rootPath || strings.HasPrefix(path, rootPath+"/") }

// rootGoMax is the highest go line the root module may have: users of an
// older Go must not be made to upgrade for the front-end alone (the graph
// step checks that a driver raises a user's go line no higher than its
// client does).
const rootGoMax = "1.24"

// checkGoLine checks that m's go line names no patch release (a go line
// is a minimum that every user's module inherits: 1.26.8 would force a
// toolchain download on anyone with 1.26.0) and that the root's is at
// most rootGoMax.
func (c *check) checkGoLine(m *repoModule) {
	name := path.Join(m.dir, "go.mod")
	if m.file.Go == nil {
		c.fail("%s has no go line", name)
		return
	}
	v := m.file.Go.Version
	if parts := strings.Split(v, "."); len(parts) == 3 && parts[2] != "0" {
		c.fail("%s says go %s: a go line must name no patch release (go %s.%s.0)", name, v, parts[0], parts[1])
	}
	if m.dir == "." && semver.Compare("v"+v, "v"+rootGoMax) > 0 {
		c.fail("%s says go %s: the root module's go line must be at most %s", name, v, rootGoMax)
	}
}

// pack writes each published module at c.version into the file proxy,
// with golang.org/x/mod/zip (which leaves out nested modules, vendor
// directories and VCS files, and checks names and sizes as the proxy does).
func (c *check) pack() {
	info, _ := json.Marshal(map[string]any{"Version": c.version, "Time": time.Now().UTC().Format(time.RFC3339)})
	for _, m := range c.mods {
		if !m.published {
			continue
		}
		mv := module.Version{Path: m.path(), Version: c.version}
		esc, err := module.EscapePath(mv.Path)
		if err != nil {
			c.fail("%v", err)
			continue
		}
		dir := filepath.Join(c.tmp, "proxy", filepath.FromSlash(esc), "@v")
		if err := os.MkdirAll(dir, 0o777); err != nil {
			c.fail("%v", err)
			continue
		}
		zipName := filepath.Join(dir, c.version+".zip")
		if err := writeZip(zipName, mv, filepath.Join(c.repo, filepath.FromSlash(m.dir))); err != nil {
			c.fail("pack %s: %v", mv, err)
			continue
		}
		h, err := dirhash.HashZip(zipName, dirhash.Hash1)
		if err != nil {
			c.fail("hash %s: %v", zipName, err)
			continue
		}
		for name, data := range map[string][]byte{
			c.version + ".mod":  m.data,
			c.version + ".info": info,
			"list":              []byte(c.version + "\n"),
		} {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o666); err != nil {
				c.fail("%v", err)
			}
		}
		c.hashes[mv.Path] = h
		st, _ := os.Stat(zipName)
		fmt.Printf("   %s %s: %d bytes, %s\n", mv.Path, mv.Version, st.Size(), h)
	}
}

func writeZip(name string, mv module.Version, dir string) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := modzip.CreateFromDir(f, mv, dir); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
