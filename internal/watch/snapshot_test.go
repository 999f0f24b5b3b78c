package watch

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/staticlet/staticlet/internal/pod"
)

// file builds a FileResult from "ns/name" keys.
func file(path string, err error, keys ...string) FileResult {
	f := FileResult{Path: path, Err: err}
	for _, k := range keys {
		ns, name, _ := strings.Cut(k, "/")
		f.Pods = append(f.Pods, newPod(ns, name, path))
	}
	return f
}

func TestMerge(t *testing.T) {
	badErr := errors.New("bad manifest")
	tests := []struct {
		name      string
		snaps     []Snapshot
		wantPods  string // keys with their source path, sorted by key
		wantFiles []string
	}{
		{
			name: "no sources",
		},
		{
			name: "distinct pods sorted by key",
			snaps: []Snapshot{{Source: "dir:/m", Files: []FileResult{
				file("/m/b.yaml", nil, "default/z", "a/y"),
				file("/m/a.yaml", nil, "default/x"),
			}}},
			wantPods:  "a/y@/m/b.yaml default/x@/m/a.yaml default/z@/m/b.yaml",
			wantFiles: []string{"a.yaml: default/x", "b.yaml: default/z,a/y"},
		},
		{
			name: "duplicate across two files: the first path wins",
			snaps: []Snapshot{{Source: "dir:/m", Files: []FileResult{
				file("/m/b.yaml", nil, "default/x", "default/other"),
				file("/m/a.yaml", nil, "default/x"),
			}}},
			wantPods: "default/other@/m/b.yaml default/x@/m/a.yaml",
			wantFiles: []string{
				"a.yaml: default/x",
				`b.yaml: default/other !pod "default/x" is also defined in /m/a.yaml; this definition is ignored`,
			},
		},
		{
			name: "duplicate across two sources: the first source name wins",
			snaps: []Snapshot{
				{Source: "url:http://example.test/pods", Files: []FileResult{file("http://example.test/pods", nil, "default/x")}},
				{Source: "dir:/z", Files: []FileResult{file("/z/a.yaml", nil, "default/x", "default/y")}},
			},
			wantPods: "default/x@/z/a.yaml default/y@/z/a.yaml",
			wantFiles: []string{
				"a.yaml: default/x,default/y",
				`pods:  !pod "default/x" is also defined in /z/a.yaml; this definition is ignored`,
			},
		},
		{
			name: "several collisions in one file, and a file's own error kept",
			snaps: []Snapshot{{Source: "dir:/m", Files: []FileResult{
				file("/m/a.yaml", nil, "default/x", "default/y"),
				file("/m/b.yaml", badErr, "default/y", "default/x", "default/z"),
			}}},
			wantPods: "default/x@/m/a.yaml default/y@/m/a.yaml default/z@/m/b.yaml",
			wantFiles: []string{
				"a.yaml: default/x,default/y",
				`b.yaml: default/z !bad manifest | pod "default/y" is also defined in /m/a.yaml; this definition is ignored | pod "default/x" is also defined in /m/a.yaml; this definition is ignored`,
			},
		},
		{
			name: "last good pods of a rejected file run and win",
			snaps: []Snapshot{{Source: "dir:/m", Files: []FileResult{
				file("/m/a.yaml", badErr, "default/x"),
				file("/m/b.yaml", nil, "default/x"),
			}}},
			wantPods: "default/x@/m/a.yaml",
			wantFiles: []string{
				"a.yaml: default/x !bad manifest",
				`b.yaml:  !pod "default/x" is also defined in /m/a.yaml; this definition is ignored`,
			},
		},
		{
			name: "same name in different namespaces is no duplicate",
			snaps: []Snapshot{
				{Source: "dir:/m", Files: []FileResult{file("/m/a.yaml", nil, "a/x")}},
				{Source: "dir:/n", Files: []FileResult{file("/n/a.yaml", nil, "b/x")}},
			},
			wantPods:  "a/x@/m/a.yaml b/x@/n/a.yaml",
			wantFiles: []string{"a.yaml: a/x", "a.yaml: b/x"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods, files := Merge(tt.snaps)
			var gotPods []string
			for _, p := range pods {
				gotPods = append(gotPods, p.Key().String()+"@"+p.Source)
			}
			if got := strings.Join(gotPods, " "); got != tt.wantPods {
				t.Errorf("Merge() pods = %q, want %q", got, tt.wantPods)
			}
			var gotFiles []string
			for _, f := range files {
				gotFiles = append(gotFiles, fileSummary(f))
			}
			if got, want := strings.Join(gotFiles, "\n"), strings.Join(tt.wantFiles, "\n"); got != want {
				t.Errorf("Merge() files =\n%s\nwant\n%s", got, want)
			}
		})
	}
}

func TestMergeKeepsErrors(t *testing.T) {
	missing := &notExistError{"gone"}
	in := []Snapshot{{Source: "dir:/m", Files: []FileResult{file("/m/a.yaml", missing, "default/x"), file("/m/b.yaml", nil, "default/x")}}}
	_, files := Merge(in)
	if files[0].Err != missing {
		t.Errorf("Merge() changed the error of a file without collisions: %v", files[0].Err)
	}
	var dup *DuplicateError
	if !errors.As(files[1].Err, &dup) || dup.Key != (pod.Key{Namespace: "default", Name: "x"}) || dup.Winner != "/m/a.yaml" {
		t.Errorf("Merge() error of the losing file = %v, want a DuplicateError for default/x won by /m/a.yaml", files[1].Err)
	}
	if !errors.Is(missing, fs.ErrNotExist) {
		t.Errorf("errors.Is(%v, fs.ErrNotExist) = false, want true", missing)
	}
	if len(in[0].Files[1].Pods) != 1 {
		t.Errorf("Merge() modified its input")
	}
}
