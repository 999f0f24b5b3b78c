package pod

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// corpusDir holds real static pod manifests, published by installers and
// guides. It sits beside the repository (shared/ next to the clone), in CI as
// in development.
var corpusDir = filepath.Join("..", "..", "..", "shared", "corpus", "real")

// TestDecodeCorpus decodes every real manifest. Each must decode and
// validate; a file that should not is listed in wantErr with the reason.
func TestDecodeCorpus(t *testing.T) {
	entries, err := os.ReadDir(corpusDir)
	if errors.Is(err, fs.ErrNotExist) && os.Getenv("CI") != "true" {
		t.Skipf("corpus %s not found", corpusDir)
	}
	if err != nil {
		t.Fatalf("reading corpus: %v", err)
	}
	// wantErr lists files expected to be rejected: file name -> a substring
	// of the error.
	wantErr := map[string]string{}
	// wantPods lists how many pods a file holds when it is not one.
	wantPods := map[string]int{}
	n := 0
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || (!strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".yml") && !strings.HasSuffix(name, ".json")) {
			continue
		}
		n++
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(corpusDir, name))
			if err != nil {
				t.Fatal(err)
			}
			pods, err := Decode(name, data, Options{NodeName: "node-1", Seen: time.Unix(0, 0)})
			if want, ok := wantErr[name]; ok {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("Decode(%s) error = %v, want one containing %q", name, err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode(%s): %v", name, err)
			}
			want := 1
			if w, ok := wantPods[name]; ok {
				want = w
			}
			if len(pods) != want {
				t.Fatalf("Decode(%s) = %d pods, want %d", name, len(pods), want)
			}
			for _, p := range pods {
				if !strings.HasSuffix(p.Name, "-node-1") || p.UID == "" || p.SandboxHash == "" || p.Spec.NodeName != "node-1" {
					t.Errorf("pod %s: identity not set: name %q uid %q sandbox hash %q node %q", p, p.Name, p.UID, p.SandboxHash, p.Spec.NodeName)
				}
			}
		})
	}
	if n == 0 {
		t.Fatalf("no manifests in %s", corpusDir)
	}
}
