package modbuild

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBuildComplete checks a complete entry is returned as it is, without
// the go command: its recipe could not be built.
func TestBuildComplete(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "v1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := Recipe{Require: []string{"x@bad"}, Commands: []Command{{Name: "a", Package: "x/a"}, {Name: "b", Package: "x/b"}}}
	if err := Build(t.Context(), dir, r); err != nil {
		t.Errorf("Build of a complete entry = %v, want nil", err)
	}
}

// TestBuildFails checks a failed build says what failed and leaves no
// entry and no build dir behind, so the next call builds again.
func TestBuildFails(t *testing.T) {
	cache := t.TempDir()
	dir := filepath.Join(cache, "v1")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// A module path without a dot: go get rejects it without the network.
	r := Recipe{Require: []string{"nodot@v1.0.0"}, Commands: []Command{{Name: "a", Package: "nodot/a"}}}
	err := Build(ctx, dir, r)
	if err == nil || !strings.Contains(err.Error(), "go get nodot@v1.0.0") {
		t.Fatalf("Build(%+v) = %v, want an error naming go get nodot@v1.0.0", r, err)
	}
	entries, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "v1.lock" {
			t.Errorf("%s left in the cache after a failed build", e.Name())
		}
	}
}

// TestBuildMain checks a command given as the source of its main package
// is built from the generated module, with the recipe's ldflags.
func TestBuildMain(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "v1")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	main := "package main\n\nvar greeting = \"unset\"\n\nfunc main() { println(greeting) }\n"
	r := Recipe{
		Commands: []Command{{Name: "hello", Main: main}},
		LDFlags:  "-X main.greeting=stamped",
	}
	if err := Build(ctx, dir, r); err != nil {
		t.Fatalf("Build: %v", err)
	}
	out, err := exec.CommandContext(ctx, filepath.Join(dir, "hello")).CombinedOutput()
	if got := strings.TrimSpace(string(out)); err != nil || got != "stamped" {
		t.Errorf("hello printed %q (%v), want stamped", got, err)
	}
}

func TestComplete(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "subdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		names []string
		want  bool
	}{
		{nil, true},
		{[]string{"file"}, true},
		{[]string{"file", "missing"}, false},
		{[]string{"subdir"}, false},
	}
	for _, tt := range tests {
		if got := Complete(dir, tt.names...); got != tt.want {
			t.Errorf("Complete(dir, %q) = %v, want %v", tt.names, got, tt.want)
		}
	}
}
