package archrules

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// mapHeading is the heading of ARCHITECTURE.md's package map. The section
// runs to the next heading of the same level; in it, every list item that
// starts with a backquoted path ("- `internal/pod`: ...") names a package,
// as a path inside the module. Subheadings group the lines; other lines
// and backquotes later in an item are prose.
const mapHeading = "## Package map"

// TestArchitectureMap checks that ARCHITECTURE.md's package map names every
// package of the module and nothing else, so that the map changes in the
// same change as the code.
func TestArchitectureMap(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	mapped, err := packageMap(string(doc))
	if err != nil {
		t.Fatalf("ARCHITECTURE.md: %v", err)
	}
	pkgs := listModule(t)
	if len(pkgs) < 10 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	listed := map[string]bool{}
	for _, p := range pkgs {
		if p.Module == nil {
			t.Errorf("%s is not in a module", p.ImportPath)
			continue
		}
		name := strings.TrimPrefix(p.ImportPath, p.Module.Path+"/")
		listed[name] = true
		if !mapped[name] {
			t.Errorf("package %s is missing from the package map in ARCHITECTURE.md: add a line for it", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(mapped)) {
		if !listed[name] {
			t.Errorf("the package map in ARCHITECTURE.md names %s, which go list does not print: remove or rename its line", name)
		}
	}
}

// packageMap returns the packages that the package map of the markdown doc
// names, or an error when doc has no such section or it names none.
func packageMap(doc string) (map[string]bool, error) {
	level := strings.Index(mapHeading, " ") // the number of '#'
	in, found := false, false
	names := map[string]bool{}
	for line := range strings.Lines(doc) {
		line = strings.TrimRight(line, "\r\n")
		if strings.HasPrefix(line, "#") {
			hashes := len(line) - len(strings.TrimLeft(line, "#"))
			if strings.TrimSpace(line) == mapHeading {
				in, found = true, true
				continue
			}
			if hashes <= level {
				in = false
			}
			continue
		}
		if !in {
			continue
		}
		rest, ok := strings.CutPrefix(line, "- `")
		if !ok {
			continue
		}
		name, _, ok := strings.Cut(rest, "`")
		if ok && name != "" {
			names[name] = true
		}
	}
	if !found {
		return nil, errNoMap
	}
	if len(names) == 0 {
		return nil, errEmptyMap
	}
	return names, nil
}

var (
	errNoMap    = errors.New(`no section "` + mapHeading + `"`)
	errEmptyMap = errors.New(`the section "` + mapHeading + "\" names no package (lines like \"- `internal/pod`: ...\")")
)

// TestPackageMap runs packageMap on small documents, so that what counts
// as the map, and what does not, is seen.
func TestPackageMap(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string
		err  error
	}{
		{
			name: "items under subheadings, prose and other sections ignored",
			doc: "# Title\n\n- `outside/before`: not in the map\n\n" +
				"## Package map\n\nOne line per package, e.g. `internal/prose`.\n\n" +
				"### Core\n\n- `internal/pod`: the vocabulary, see `internal/other`.\n" +
				"- `internal/reconcile`: the loop,\n  continued on `internal/wrapped`.\n\n" +
				"### Harness\n\n- `internal/testutil/x`: a helper.\n\n" +
				"## Import rules\n\n- `cmd/after`: not in the map\n",
			want: []string{"internal/pod", "internal/reconcile", "internal/testutil/x"},
		},
		{
			name: "the map as the last section, with CRLF line ends",
			doc:  "## Package map\r\n- `cmd/a`: a command\r\n- `cmd/b`\r\n",
			want: []string{"cmd/a", "cmd/b"},
		},
		{
			name: "a deeper heading of the same name does not start the map",
			doc:  "### Package map\n- `cmd/a`\n",
			err:  errNoMap,
		},
		{
			name: "no map",
			doc:  "# Architecture\n\n- `cmd/a`\n",
			err:  errNoMap,
		},
		{
			name: "a map that names nothing",
			doc:  "## Package map\n\nTo be written.\n\n- an item without a path\n",
			err:  errEmptyMap,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := packageMap(tt.doc)
			if err != tt.err {
				t.Fatalf("packageMap() error = %v, want %v", err, tt.err)
			}
			names := slices.Sorted(maps.Keys(got))
			if !slices.Equal(names, tt.want) {
				t.Errorf("packageMap() = %q, want %q", names, tt.want)
			}
		})
	}
}
