package locker_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestPackageDocListsErrors checks that the package documentation's Errors
// section names every exported error variable of the package, so that the
// list cannot drift from errors.go and the files beside it again.
func TestPackageDocListsErrors(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	pkg := pkgs["locker"]
	if pkg == nil {
		t.Fatal("no package locker in .")
	}
	var doc string
	var errs []string
	for name, f := range pkg.Files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		if f.Doc != nil && f.Name.Name == "locker" && strings.HasPrefix(f.Doc.Text(), "Package locker") {
			doc = f.Doc.Text()
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, s := range gd.Specs {
				for _, id := range s.(*ast.ValueSpec).Names {
					if id.IsExported() && strings.HasPrefix(id.Name, "Err") {
						errs = append(errs, id.Name)
					}
				}
			}
		}
	}
	if doc == "" {
		t.Fatal("no package documentation found")
	}
	slices.Sort(errs)
	if len(errs) == 0 {
		t.Fatal("found no exported Err variables: the test is looking in the wrong place")
	}
	i := strings.Index(doc, "\n# Errors\n")
	if i < 0 {
		t.Fatal("the package documentation has no Errors section")
	}
	section := doc[i:]
	if j := strings.Index(section[1:], "\n# "); j >= 0 {
		section = section[:j+1]
	}
	for _, name := range errs {
		if !regexp.MustCompile(`\b` + name + `\b`).MatchString(section) {
			t.Errorf("the Errors section of the package documentation does not name %s", name)
		}
	}
	t.Logf("the Errors section names all %d error variables: %v", len(errs), errs)
}
