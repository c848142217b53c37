package locker_test

import (
	"bufio"
	"bytes"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// readmeMaxLines is the length README.md promises to stay within: a page a
// Go developer reads in two minutes. What does not fit goes to docs/ and
// to the package documentation.
const readmeMaxLines = 200

// readmeImports names the packages a README Go block may use without an
// import declaration, by the name it uses them under. A block that lists
// its imports keeps them as written.
var readmeImports = map[string]string{
	"context":        "context",
	"errors":         "errors",
	"fmt":            "fmt",
	"http":           "net/http",
	"log":            "log",
	"os":             "os",
	"signal":         "os/signal",
	"sql":            "database/sql",
	"syscall":        "syscall",
	"time":           "time",
	"locker":         "github.com/go-locker/locker",
	"driver":         "github.com/go-locker/locker/driver",
	"lockertest":     "github.com/go-locker/locker/lockertest",
	"memdriver":      "github.com/go-locker/locker/driver/memdriver",
	"redisdriver":    "github.com/go-locker/locker/driver/redisdriver",
	"etcddriver":     "github.com/go-locker/locker/driver/etcddriver",
	"zkdriver":       "github.com/go-locker/locker/driver/zkdriver",
	"sqldriver":      "github.com/go-locker/locker/driver/sqldriver",
	"memcachedriver": "github.com/go-locker/locker/driver/memcachedriver",
	"mongodriver":    "github.com/go-locker/locker/driver/mongodriver",
	"quorumdriver":   "github.com/go-locker/locker/driver/quorumdriver",
	"redis":          "github.com/redis/go-redis/v9",
	"clientv3":       "go.etcd.io/etcd/client/v3",
	"memcache":       "github.com/bradfitz/gomemcache/memcache",
	"mongo":          "go.mongodb.org/mongo-driver/v2/mongo",
}

// readmeBlock is a ```go block of README.md and the line it starts on.
type readmeBlock struct {
	line int
	src  string
}

func readmeGoBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	f, err := os.Open("README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		blocks []readmeBlock
		cur    *readmeBlock
		lineNo int
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur = &readmeBlock{line: lineNo + 1}
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.src += line + "\n"
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("README.md:%d: ```go block never closed", cur.line-1)
	}
	return blocks
}

// readmeFile makes a Go file of a README block. A block that starts with a
// package clause is a file already. Otherwise it is the declarations of a
// file (functions, types, variables), given a package clause and, when it
// has no import declaration, the imports from readmeImports of the package
// names it uses.
func readmeFile(t *testing.T, b readmeBlock, pkg string) []byte {
	t.Helper()
	if strings.HasPrefix(strings.TrimSpace(b.src), "package ") {
		return []byte(b.src)
	}
	src := "package " + pkg + "\n\n" + b.src
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "README.md", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("README.md:%d: the block is neither a file nor declarations: %v", b.line, err)
	}
	if len(f.Imports) > 0 {
		return []byte(src)
	}
	local := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			if n.Tok == token.DEFINE {
				for _, l := range n.Lhs {
					if id, ok := l.(*ast.Ident); ok {
						local[id.Name] = true
					}
				}
			}
		case *ast.Field:
			for _, id := range n.Names {
				local[id.Name] = true
			}
		case *ast.ValueSpec:
			for _, id := range n.Names {
				local[id.Name] = true
			}
		}
		return true
	})
	used := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && !local[id.Name] {
				if _, known := readmeImports[id.Name]; known {
					used[id.Name] = true
				}
			}
		}
		return true
	})
	var imports []string
	for name := range used {
		path := readmeImports[name]
		if filepath.Base(path) == name {
			imports = append(imports, strconv.Quote(path))
		} else {
			imports = append(imports, name+" "+strconv.Quote(path))
		}
	}
	slices.Sort(imports)
	var out bytes.Buffer
	out.WriteString("package " + pkg + "\n\n")
	if len(imports) > 0 {
		out.WriteString("import (\n\t" + strings.Join(imports, "\n\t") + "\n)\n\n")
	}
	// A line directive keeps the compiler's positions on README.md's lines.
	out.WriteString("//line README.md:" + strconv.Itoa(b.line) + "\n")
	out.WriteString(b.src)
	return out.Bytes()
}

// TestREADMEGoBlocks compiles every ```go block of README.md with go vet,
// inside this module (so that they build against the code beside them, not
// a published version): a block that no longer compiles, or that vet
// faults, fails here. A block that starts with a package clause is a
// package of its own; the others are the files of one package, as if they
// were parts of one program (the quick start's main calls the pay of the
// fencing block).
func TestREADMEGoBlocks(t *testing.T) {
	blocks := readmeGoBlocks(t)
	if len(blocks) == 0 {
		t.Fatal("README.md has no ```go block")
	}
	goCmd := "go"
	if p, err := exec.LookPath("go"); err == nil {
		goCmd = p
	} else if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		goCmd = p
	} else {
		t.Fatalf("no go command to compile README.md's blocks: %v", err)
	}

	// A directory whose name starts with "_" is left out of ./... patterns,
	// so that one left behind by a killed run is never built by others.
	dir, err := os.MkdirTemp(".", "_readmecheck")
	if errors.Is(err, fs.ErrPermission) {
		// A read-only copy, as in the module cache under go test all:
		// the repository's own runs compile the blocks.
		t.Skipf("cannot write in the module directory to compile README.md's blocks: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })

	shared := "readme"
	for _, b := range blocks {
		if strings.Contains(b.src, "\nfunc main() {") || strings.HasPrefix(b.src, "func main() {") {
			shared = "main"
		}
	}
	pkgs := map[string]bool{}
	for i, b := range blocks {
		pkg, name := shared, "block"+strconv.Itoa(i+1)
		if strings.HasPrefix(strings.TrimSpace(b.src), "package ") {
			pkg = name
		}
		pkgDir := filepath.Join(dir, pkg)
		if err := os.MkdirAll(pkgDir, 0o755); err != nil {
			t.Fatal(err)
		}
		src := readmeFile(t, b, pkg)
		if err := os.WriteFile(filepath.Join(pkgDir, name+".go"), src, 0o644); err != nil {
			t.Fatal(err)
		}
		pkgs["./"+filepath.ToSlash(pkgDir)] = true
	}
	args := []string{"vet"}
	for p := range pkgs {
		args = append(args, p)
	}
	slices.Sort(args[1:])
	cmd := exec.Command(goCmd, args...)
	cmd.Env = append(os.Environ(), "GOFLAGS=") // no -race or -mod from the caller
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("README.md's Go blocks do not compile (%d blocks): %v\n%s", len(blocks), err, out)
	}
	t.Logf("compiled and vetted %d Go blocks of README.md", len(blocks))
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestREADMELength keeps README.md to the length it promises.
func TestREADMELength(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move detail to docs/ or the package docs", n, readmeMaxLines)
	}
}

// TestREADMELinks checks that every relative link of README.md and of the
// files in docs/ names a file or directory of the repository.
func TestREADMELinks(t *testing.T) {
	files := []string{"README.md"}
	docs, _ := filepath.Glob(filepath.Join("docs", "*.md"))
	files = append(files, docs...)
	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			p := filepath.Join(filepath.Dir(name), filepath.FromSlash(target))
			if !fileExists(p) {
				t.Errorf("%s links to %s, which does not exist", name, target)
			}
		}
	}
}
