package archrules

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackageDocs checks that every package of the module has a package doc
// comment ("Package x ...", or "Command ..." for a program), the place where
// a package says its one job: what it owns, what it does not, and how it may
// be used concurrently.
func TestPackageDocs(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	dirs := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin") && path != root {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			dirs[filepath.Dir(path)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 8 {
		t.Fatalf("found only %d packages under %s", len(dirs), root)
	}
	for dir := range dirs {
		pkgs, err := parser.ParseDir(token.NewFileSet(), dir, func(fi fs.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			t.Fatal(err)
		}
		for name, pkg := range pkgs {
			documented := false
			for _, f := range pkg.Files {
				if f.Doc != nil && strings.HasPrefix(f.Doc.Text(), "Package "+name+" ") || f.Doc != nil && name == "main" && strings.HasPrefix(f.Doc.Text(), "Command ") {
					documented = true
				}
			}
			if !documented {
				t.Errorf("package %s in %s has no package doc comment (\"Package %s ...\" or \"Command ...\")", name, dir, name)
			}
		}
	}
}
