package logs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestOverBudget(t *testing.T) {
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	files := []LogFile{
		{Path: "a/c/1.log", Size: 100, ModTime: at(9), Kind: Live},
		{Path: "a/c/1.log.20261121-031500", Size: 300, ModTime: at(5), Kind: Rotated},
		{Path: "a/c/0.log", Size: 50, ModTime: at(1), Kind: Earlier},
		{Path: "b/c/0.log", Size: 100, ModTime: at(9), Kind: Live},
		{Path: "b/c/0.log.20261121-031000", Size: 200, ModTime: at(2), Kind: Rotated},
		{Path: "b/c/0.log.20261121-031600", Size: 200, ModTime: at(6), Kind: Rotated},
		{Path: "b/c/notes.gz", Size: 10, ModTime: at(0), Kind: Other},
	} // 960 bytes in all
	for _, tc := range []struct {
		name string
		max  int64
		want []string
	}{
		{"no budget", 0, nil},
		{"within", 960, nil},
		{"one byte over: the oldest rotated file of any container", 959, []string{"b/c/0.log.20261121-031000"}},
		{"rotated files oldest first, then earlier instances", 300, []string{
			"b/c/0.log.20261121-031000", "a/c/1.log.20261121-031500", "b/c/0.log.20261121-031600",
		}},
		{"earlier instances once rotated files are gone", 250, []string{
			"b/c/0.log.20261121-031000", "a/c/1.log.20261121-031500", "b/c/0.log.20261121-031600", "a/c/0.log",
		}},
		{"live and other files stay, over the budget", 1, []string{
			"b/c/0.log.20261121-031000", "a/c/1.log.20261121-031500", "b/c/0.log.20261121-031600", "a/c/0.log",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, f := range OverBudget(files, tc.max) {
				got = append(got, f.Path)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("OverBudget(max %d) = %q, want %q", tc.max, got, tc.want)
			}
		})
	}
}

func TestScanAndEnforceBudget(t *testing.T) {
	dir := t.TempDir()
	write := func(rel string, size int, age time.Duration) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
		when := time.Now().Add(-age)
		if err := os.Chtimes(p, when, when); err != nil {
			t.Fatal(err)
		}
	}
	write("ns_a_1/c/0.log", 10, 3*time.Hour)
	write("ns_a_1/c/1.log", 10, 0)
	write("ns_a_1/c/1.log.20261121-031500", 100, time.Hour)
	write("ns_a_1/c/1.log.20261121-031500.2", 100, 30*time.Minute)
	write("ns_b_2/d/0.log", 10, 0)
	write("ns_b_2/d/0.log.20261121-030000", 100, 2*time.Hour)
	write("ns_b_2/d/0.log.gz", 5, 4*time.Hour)
	write("stray", 1, 0)

	files, err := ScanLogFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, f := range files {
		rel, _ := filepath.Rel(dir, f.Path)
		kinds[rel] = f.Kind.String()
	}
	wantKinds := map[string]string{
		"ns_a_1/c/0.log": "earlier", "ns_a_1/c/1.log": "live",
		"ns_a_1/c/1.log.20261121-031500": "rotated", "ns_a_1/c/1.log.20261121-031500.2": "rotated",
		"ns_b_2/d/0.log": "live", "ns_b_2/d/0.log.20261121-030000": "rotated", "ns_b_2/d/0.log.gz": "other",
	}
	if fmt.Sprint(kinds) != fmt.Sprint(wantKinds) {
		t.Errorf("ScanLogFiles() kinds = %v, want %v", kinds, wantKinds)
	}

	// 335 bytes; a budget of 200 removes the two oldest rotated files.
	removed, err := EnforceBudget(dir, 200)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range removed {
		rel, _ := filepath.Rel(dir, f.Path)
		got = append(got, rel)
	}
	want := []string{"ns_b_2/d/0.log.20261121-030000", "ns_a_1/c/1.log.20261121-031500"}
	if !slices.Equal(got, want) {
		t.Errorf("EnforceBudget(200) removed %q, want %q", got, want)
	}
	for _, rel := range want {
		if _, err := os.Stat(filepath.Join(dir, rel)); !os.IsNotExist(err) {
			t.Errorf("%s: still there after EnforceBudget (%v)", rel, err)
		}
	}
	if removed, err := EnforceBudget(filepath.Join(dir, "missing"), 1); err != nil || len(removed) > 0 {
		t.Errorf("EnforceBudget(a missing directory) = %v, %v; want nothing, no error", removed, err)
	}
}
