package archrules

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// Code stays readable only while its pieces stay small. These are the
// limits the maintainers agreed on; a type or function that needs more says
// why in its doc comment with the word "outsized", and is let through.
const (
	// maxStructFields holds for every struct of the module's product and
	// helper code (not its tests).
	maxStructFields = 15
	// maxFuncLines holds for the functions of the packages in
	// funcLimited, where behaviour lives.
	maxFuncLines = 80
)

// funcLimited are the directories, relative to the module's root, whose
// functions must stay under maxFuncLines.
var funcLimited = map[string]bool{
	"internal/reconcile": true,
}

// splitting are the structs, as "dir.Name", that break maxStructFields
// today and are being split up (issue 23: sandbox's trades become packages
// of their own). TestShape lets them through, and fails once one no longer
// breaks the limit, so that its row is removed with the change that fixed
// it: the list only shrinks.
var splitting = map[string]bool{}

// TestShape fails when a struct of the module outgrows maxStructFields
// fields, or a function of a funcLimited package maxFuncLines lines.
func TestShape(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	fset := token.NewFileSet()
	checked := 0
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		checked++
		dir := filepath.ToSlash(rel)
		for _, p := range shapeProblems(fset, f, funcLimited[dir]) {
			if p.isStruct && splitting[dir+"."+p.name] {
				seen[dir+"."+p.name] = true
				t.Logf("%s (being split up)", p)
				continue
			}
			t.Error(p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked only %d files under %s", checked, root)
	}
	for name := range splitting {
		if !seen[name] {
			t.Errorf("struct %s is within the limits now: remove its row from splitting", name)
		}
	}
}

// problem is one piece of code over a limit.
type problem struct {
	pos      token.Position
	isStruct bool
	name     string
	size     int
}

func (p problem) String() string {
	if p.isStruct {
		return fmt.Sprintf("%s: struct %s has %d fields, over %d", p.pos, p.name, p.size, maxStructFields)
	}
	return fmt.Sprintf("%s: func %s has %d lines, over %d", p.pos, p.name, p.size, maxFuncLines)
}

// shapeProblems lists what in f breaks the limits; the function length
// only when funcs is true.
func shapeProblems(fset *token.FileSet, f *ast.File, funcs bool) []problem {
	var out []problem
	excused := func(doc *ast.CommentGroup) bool { return doc != nil && strings.Contains(doc.Text(), "outsized") }
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			lines := fset.Position(d.End()).Line - fset.Position(d.Pos()).Line + 1
			if funcs && lines > maxFuncLines && !excused(d.Doc) {
				out = append(out, problem{pos: fset.Position(d.Pos()), name: d.Name.Name, size: lines})
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
				if n > maxStructFields && !excused(doc) {
					out = append(out, problem{pos: fset.Position(ts.Pos()), isStruct: true, name: ts.Name.Name, size: n})
				}
			}
		}
	}
	return out
}

// TestShapeProblems checks that shapeProblems finds what it is for.
func TestShapeProblems(t *testing.T) {
	long := "package x\nfunc long() {\n" + strings.Repeat("\t_ = 1\n", maxFuncLines) + "}\n"
	wide := "package x\ntype wide struct {\n" + strings.Repeat("\ta, b int\n", maxStructFields/2+1) + "}\n"
	excusedWide := "package x\n// excused is outsized: it must be.\n" + wide[len("package x\n"):]
	for _, tt := range []struct {
		src   string
		funcs bool
		want  int
	}{
		{long, true, 1},
		{long, false, 0},
		{wide, false, 1},
		{excusedWide, false, 0},
		{"package x\nfunc short() {}\ntype narrow struct{ a int }\n", true, 0},
	} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "x.go", tt.src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if got := shapeProblems(fset, f, tt.funcs); len(got) != tt.want {
			t.Errorf("shapeProblems(%.40q, funcs=%v) = %v, want %d problems", tt.src, tt.funcs, got, tt.want)
		}
	}
}
