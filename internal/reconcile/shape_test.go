package reconcile

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// The reconciler is where staticlet's behaviour lives; it stays readable
// only while its pieces stay small. These are the limits its maintainers
// agreed on; a type or function that needs more says why in its doc
// comment with the word "outsized", and is let through.
const (
	maxFuncLines   = 80
	maxStructField = 15
)

// TestShape fails when a function of the package outgrows maxFuncLines
// lines or a struct maxStructField fields.
func TestShape(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fs := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fs, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, problem := range shapeProblems(fs, f) {
			t.Error(problem)
		}
	}
}

// shapeProblems lists what in f breaks the limits.
func shapeProblems(fs *token.FileSet, f *ast.File) []string {
	var out []string
	excused := func(doc *ast.CommentGroup) bool { return doc != nil && strings.Contains(doc.Text(), "outsized") }
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			lines := fs.Position(d.End()).Line - fs.Position(d.Pos()).Line + 1
			if lines > maxFuncLines && !excused(d.Doc) {
				out = append(out, fmt.Sprintf("%s: func %s has %d lines, over %d", fs.Position(d.Pos()), d.Name.Name, lines, maxFuncLines))
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				ts, ok := s.(*ast.TypeSpec)
				if !ok {
					continue
				}
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				n := 0
				for _, fl := range st.Fields.List {
					n += max(len(fl.Names), 1)
				}
				doc := ts.Doc
				if doc == nil {
					doc = d.Doc
				}
				if n > maxStructField && !excused(doc) {
					out = append(out, fmt.Sprintf("%s: struct %s has %d fields, over %d", fs.Position(ts.Pos()), ts.Name.Name, n, maxStructField))
				}
			}
		}
	}
	return out
}

// TestShapeProblems checks that shapeProblems finds what it is for.
func TestShapeProblems(t *testing.T) {
	long := "package x\nfunc long() {\n" + strings.Repeat("\t_ = 1\n", maxFuncLines) + "}\n"
	wide := "package x\ntype wide struct {\n" + strings.Repeat("\ta, b int\n", maxStructField/2+1) + "}\n"
	excusedWide := "package x\n// excused is outsized: it must be.\n" + wide[len("package x\n"):]
	for _, tt := range []struct {
		src  string
		want int
	}{
		{long, 1},
		{wide, 1},
		{excusedWide, 0},
		{"package x\nfunc short() {}\ntype narrow struct{ a int }\n", 0},
	} {
		fs := token.NewFileSet()
		f, err := parser.ParseFile(fs, "x.go", tt.src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if got := shapeProblems(fs, f); len(got) != tt.want {
			t.Errorf("shapeProblems(%.40q) = %q, want %d problems", tt.src, got, tt.want)
		}
	}
}
