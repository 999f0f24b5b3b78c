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
	dirs := map[string][]string{} // a directory's non-test Go files
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin") && path != root {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			dirs[filepath.Dir(path)] = append(dirs[filepath.Dir(path)], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 8 {
		t.Fatalf("found only %d packages under %s", len(dirs), root)
	}
	for dir, files := range dirs {
		documented := map[string]bool{} // by package name
		for _, path := range files {
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments|parser.PackageClauseOnly)
			if err != nil {
				t.Fatal(err)
			}
			name := f.Name.Name
			doc := ""
			if f.Doc != nil {
				doc = f.Doc.Text()
			}
			documented[name] = documented[name] || strings.HasPrefix(doc, "Package "+name+" ") || name == "main" && strings.HasPrefix(doc, "Command ")
		}
		for name, ok := range documented {
			if !ok {
				t.Errorf("package %s in %s has no package doc comment (\"Package %s ...\" or \"Command ...\")", name, dir, name)
			}
		}
	}
}
