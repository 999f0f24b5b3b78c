package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/status"
	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// badManifests are malformed files, each with what its error must say. An
// empty want means the file must be ignored altogether.
var badManifests = []struct {
	name    string
	content string
	want    []string // substrings of the file's error
}{
	{"syntax.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: [broken\n", []string{"syntax.yaml", ":4"}},
	{"unknown-field.yaml", strings.Replace(harness.SleeperPod("unknown", "x", true), "    image:", "    imagePullPolcy: Always\n    image:", 1),
		[]string{"unknown-field.yaml", "spec.containers[0].imagePullPolcy", "unknown field"}},
	{"wrong-type.yaml", strings.Replace(harness.SleeperPod("wrongtype", "x", true), "terminationGracePeriodSeconds: 5", "terminationGracePeriodSeconds: soon", 1),
		[]string{"wrong-type.yaml", "spec.terminationGracePeriodSeconds"}},
	{"no-image.yaml", strings.Replace(harness.SleeperPod("noimage", "x", true), "    image: localhost/busybox:test\n", "", 1),
		[]string{"no-image.yaml", "spec.containers[0].image"}},
	{"zz-duplicate.yaml", harness.SleeperPod("good", "other", true), []string{"good.yaml", "good-" + harness.TestNode, "also defined"}},
	{"empty.yaml", "", []string{"empty.yaml"}},
	{"binary.yaml", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\xff\xfe", []string{"binary.yaml"}},
	{".hidden.yaml", harness.SleeperPod("hidden", "x", true), nil},
	{".good.yaml.swp", harness.SleeperPod("swap", "x", true), nil},
	{"good.yaml~", harness.SleeperPod("backup", "x", true), nil},
}

// TestBadInput puts each kind of malformed manifest next to a good one:
// each gets a clear error (or is ignored), the good pod keeps running, and
// staticlet keeps going.
func TestBadInput(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	e.Write("good.yaml", harness.SleeperPod("good", "x", true))
	p := d.WaitPod("good-"+harness.TestNode, 30*time.Second, "good pod running", harness.Running)
	goodID := p.Status.ContainerStatuses[0].ContainerID

	for _, m := range badManifests {
		e.Write(m.name, m.content)
	}
	big := filepath.Join(e.Manifest, "big.yaml")
	if err := os.WriteFile(big, bytes.Repeat([]byte("# padding\n"), 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}

	var byPath map[string]status.Manifest
	harness.WaitFor(t, 10*time.Second, "every bad file reported", func() (bool, string) {
		ms, err := d.Client().Manifests(t.Context())
		if err != nil {
			return false, err.Error()
		}
		byPath = map[string]status.Manifest{}
		for _, m := range ms {
			byPath[filepath.Base(m.Path)] = m
		}
		for _, m := range badManifests {
			if _, ok := byPath[m.name]; ok != (m.want != nil) {
				return false, "missing or unexpected " + m.name
			}
		}
		// big.yaml is written in place, so it may be read half-written
		// first; its final error is the size limit.
		big := byPath["big.yaml"].Error
		return strings.Contains(big, "limit"), "big.yaml: " + big
	})
	for _, m := range badManifests {
		if m.want == nil {
			continue
		}
		got := byPath[m.name].Error
		for _, w := range m.want {
			if !strings.Contains(got, w) {
				t.Errorf("error for %s = %q, want it to contain %q", m.name, got, w)
			}
		}
		if !strings.Contains(d.Out.String(), m.name) {
			t.Errorf("the log never mentions %s", m.name)
		}
	}
	if got := byPath["big.yaml"].Error; !strings.Contains(got, "limit") {
		t.Errorf("error for big.yaml = %q, want a size limit error", got)
	}
	if got := byPath["good.yaml"]; got.Error != "" || len(got.Pods) != 1 {
		t.Errorf("good.yaml = %+v, want one pod and no error", got)
	}

	// The good pod was not disturbed and nothing else runs.
	p = d.WaitPod("good-"+harness.TestNode, 5*time.Second, "good pod still running", harness.Running)
	if id := p.Status.ContainerStatuses[0].ContainerID; id != goodID || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("good pod's container = %s (restarts %d), want %s untouched", id, p.Status.ContainerStatuses[0].RestartCount, goodID)
	}
	list, err := d.Client().Pods(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Errorf("%d pods listed, want only the good one", len(list.Items))
	}
	out, err := d.CLI("get", "manifests")
	if err != nil || !strings.Contains(out, "unknown field") {
		t.Errorf("get manifests = %q, %v; want the errors listed", out, err)
	}

	// A good file turning bad keeps its pod running, with the error shown.
	e.Write("good.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: good}\nspec: {containers: [{name: main, image: ''}]}\n")
	harness.WaitFor(t, 10*time.Second, "error on good.yaml", func() (bool, string) {
		ms, _ := d.Client().Manifests(t.Context())
		for _, m := range ms {
			if filepath.Base(m.Path) == "good.yaml" {
				return m.Error != "", m.Error
			}
		}
		return false, "good.yaml not listed"
	})
	p = d.WaitPod("good-"+harness.TestNode, 5*time.Second, "good pod still running", harness.Running)
	if id := p.Status.ContainerStatuses[0].ContainerID; id != goodID {
		t.Errorf("pod of a file that turned invalid was restarted: %s, want %s", id, goodID)
	}
	line, _ := d.Notify.Has("STATUS=")
	if !strings.Contains(line, "manifest error") {
		t.Errorf("STATUS= %q does not count the manifest errors", line)
	}
	if !d.Running() {
		t.Fatal("staticlet exited on bad input")
	}
}

// TestValidate runs `staticlet validate` over bad files, the examples and
// the corpus of real manifests.
func TestValidate(t *testing.T) {
	dir := t.TempDir()
	for _, m := range badManifests {
		if m.want == nil || m.name == "zz-duplicate.yaml" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, m.name), []byte(m.content), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(harness.Binary(t), "validate", filepath.Join(dir, m.name)).CombinedOutput()
		if code := harness.ExitCodeOf(err); code != 1 {
			t.Errorf("validate %s: exit %d, want 1\n%s", m.name, code, out)
		}
		for _, w := range m.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("validate %s = %q, want it to contain %q", m.name, out, w)
			}
		}
	}
	out, err := exec.Command(harness.Binary(t), "validate", "../../manifests").CombinedOutput()
	if err != nil {
		t.Errorf("validate manifests/: %v\n%s", err, out)
	}
	corpus := filepath.Join("..", "..", "..", "shared", "corpus", "real")
	if _, err := os.Stat(corpus); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("corpus of real manifests missing: %v", err)
		}
		t.Skipf("corpus of real manifests missing: %v", err)
	}
	// Every corpus manifest is valid on its own; some define the same pod
	// (two kube-vip variants, two copies of static-web), which validating them
	// together must report.
	files, _ := filepath.Glob(filepath.Join(corpus, "*.yaml"))
	if len(files) == 0 {
		t.Fatalf("no manifests in %s", corpus)
	}
	for _, f := range files {
		if out, err := exec.Command(harness.Binary(t), "validate", f).CombinedOutput(); err != nil {
			t.Errorf("validate %s: %v\n%s", f, err, out)
		}
	}
	out, err = exec.Command(harness.Binary(t), append([]string{"validate"}, files...)...).CombinedOutput()
	if code := harness.ExitCodeOf(err); code != 1 || !strings.Contains(string(out), "also defined") {
		t.Errorf("validate of the whole corpus: exit %d, want 1 with the duplicates named\n%s", code, out)
	}
}
