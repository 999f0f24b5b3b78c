package watch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// fakeDecode stands in for pod.Decode: one pod per "name: x" or
// "name: ns/x" line (namespace "default" when none), and an error for the
// content "bad".
func fakeDecode(path string, data []byte) (*pod.Manifest, error) {
	pods, err := fakePods(path, data)
	if err != nil {
		return nil, err
	}
	return &pod.Manifest{Pods: pods}, nil
}

// fakePods is fakeDecode's pods.
func fakePods(path string, data []byte) ([]*pod.Pod, error) {
	text := strings.TrimSpace(string(data))
	if text == "bad" {
		return nil, errors.New("bad manifest")
	}
	var pods []*pod.Pod
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		name, ok := strings.CutPrefix(line, "name: ")
		if !ok {
			return nil, fmt.Errorf("line %q: want \"name: x\"", line)
		}
		ns, name, ok := strings.Cut(name, "/")
		if !ok {
			ns, name = "default", ns
		}
		pods = append(pods, newPod(ns, name, path))
	}
	return pods, nil
}

func newPod(ns, name, source string) *pod.Pod {
	return &pod.Pod{
		Pod:    &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
		Source: source,
	}
}

// countingDecoder wraps fakeDecode and counts its calls.
type countingDecoder struct{ calls atomic.Int64 }

func (c *countingDecoder) decode(path string, data []byte) (*pod.Manifest, error) {
	c.calls.Add(1)
	return fakeDecode(path, data)
}

// summary renders a snapshot for comparison: "a.yaml: default/a" per file,
// "!error" after a file's pods, files joined by "; ", and the source error
// first as "!error", with root replaced by ROOT.
func summary(s Snapshot, root string) string {
	var parts []string
	if s.Err != nil {
		parts = append(parts, "!"+s.Err.Error())
	}
	for _, f := range s.Files {
		parts = append(parts, fileSummary(f))
	}
	return strings.ReplaceAll(strings.Join(parts, "; "), root, "ROOT")
}

func fileSummary(f FileResult) string {
	keys := make([]string, len(f.Pods))
	for i, p := range f.Pods {
		keys[i] = p.Key().String()
	}
	s := filepath.Base(f.Path) + ": " + strings.Join(keys, ",")
	if f.Err != nil {
		s += " !" + strings.ReplaceAll(f.Err.Error(), "\n", " | ")
	}
	return s
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, cond func() bool) bool {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

// File system steps for the scenarios; paths are relative to the test root.

type fsOp func(t *testing.T, root string)

func write(rel, content string) fsOp {
	return func(t *testing.T, root string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// sparse creates a file of size bytes without writing them.
func sparse(rel string, size int64) fsOp {
	return func(t *testing.T, root string) {
		t.Helper()
		f, err := os.Create(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
	}
}

func mkdir(rel string) fsOp {
	return func(t *testing.T, root string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, rel), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func remove(rel string) fsOp {
	return func(t *testing.T, root string) {
		t.Helper()
		if err := os.RemoveAll(filepath.Join(root, rel)); err != nil {
			t.Fatal(err)
		}
	}
}

func rename(from, to string) fsOp {
	return func(t *testing.T, root string) {
		t.Helper()
		if err := os.Rename(filepath.Join(root, from), filepath.Join(root, to)); err != nil {
			t.Fatal(err)
		}
	}
}

func symlink(target, rel string) fsOp {
	return func(t *testing.T, root string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(root, rel)); err != nil {
			t.Fatal(err)
		}
	}
}

func all(ops ...fsOp) fsOp {
	return func(t *testing.T, root string) {
		t.Helper()
		for _, op := range ops {
			op(t, root)
		}
	}
}

// hasIgnoredFile reports whether any snapshot lists a file the directory
// listing must skip.
func hasIgnoredFile(snaps []Snapshot) (string, bool) {
	for _, s := range snaps {
		for _, f := range s.Files {
			if ignored(filepath.Base(f.Path)) {
				return f.Path, true
			}
		}
		if !slices.IsSortedFunc(s.Files, func(a, b FileResult) int { return strings.Compare(a.Path, b.Path) }) {
			return "unsorted files", true
		}
	}
	return "", false
}
