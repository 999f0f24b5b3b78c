package openapi

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/staticlet/staticlet/internal/testutil/tier"
)

// generatedFile is the file the go:generate line in doc.go writes.
const generatedFile = "zz_generated.openapi.go"

// TestGeneratedIsCurrent runs doc.go's go:generate command into a temp dir
// and fails when its output differs from the committed file: a package or
// a k8s.io module changed without `make generate`.
func TestGeneratedIsCurrent(t *testing.T) {
	tier.Integration(t, "go tool openapi-gen, which type-checks k8s.io/api")
	args := generateArgs(t)
	i := slices.Index(args, "--output-dir")
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("the go:generate line names no --output-dir: %q", args)
	}
	dir := t.TempDir()
	args[i+1] = dir
	cmd := exec.CommandContext(t.Context(), args[0], args[1:]...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	want, err := os.ReadFile(filepath.Join(dir, generatedFile))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(generatedFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale: run `make generate` and commit the result", generatedFile)
	}
}

// generateArgs is the command of doc.go's go:generate line.
func generateArgs(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(src)) {
		if cmd, ok := strings.CutPrefix(line, "//go:generate "); ok {
			return strings.Fields(cmd)
		}
	}
	t.Fatal("doc.go has no go:generate line")
	return nil
}
