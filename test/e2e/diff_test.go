package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

const diffed = `apiVersion: v1
kind: Pod
metadata:
  name: diffed
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: localhost/busybox:test
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
  - name: side
    image: localhost/busybox:test
    args: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
  volumes:
  - name: scratch
    emptyDir: {}
`

// TestDiff: staticlet diff tells what saving an edit of a running pod's
// manifest would do, with kubectl diff's exit codes, and touches nothing.
func TestDiff(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	e.Write("diffed.yaml", diffed)
	name := "diffed-" + harness.TestNode
	before := d.WaitPod(name, 60*time.Second, "diffed running", func(p *v1.Pod) bool {
		return harness.Running(p) && len(p.Status.ContainerStatuses) == 2
	})

	work := t.TempDir()
	tests := []struct {
		name     string
		file     string // the base name of the edited file
		manifest string
		code     int
		want     []string // in the output
	}{
		{"unchanged", "diffed.yaml", diffed, 0, []string{"pod default/" + name + ": nothing"}},
		{"args", "diffed.yaml", strings.Replace(diffed, "args: [sh, -c, \"trap", "args: [sh, -xc, \"trap", 1), 1, []string{
			"pod default/" + name + ": restart container side (args changed)",
			"--- default/" + name + " (running)",
			"+++ default/" + name + " (",
			"-    - -c", "+    - -xc",
		}},
		{"volume", "diffed.yaml", strings.Replace(diffed, "emptyDir: {}", "emptyDir: {medium: Memory}", 1), 1, []string{
			"pod default/" + name + ": replace the pod: pod-level field spec.volumes changed",
			"+      medium: Memory",
		}},
		{"another pod in its place", "diffed.yaml", strings.Replace(diffed, "name: diffed", "name: other", 1), 1, []string{
			"pod default/" + name + ": remove",
			"pod default/other-" + harness.TestNode + ": add",
			"+++ /dev/null", "--- /dev/null",
		}},
		{"invalid", "diffed.yaml", strings.Replace(diffed, "    image: localhost/busybox:test\n    args", "    image: localhost/busybox:test\n    imagePullPolcy: Never\n    args", 1), 2, []string{
			"diffed.yaml:", "spec.containers[1].imagePullPolcy",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(work, strings.ReplaceAll(tc.name, " ", "-"))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, tc.file)
			if err := os.WriteFile(path, []byte(tc.manifest), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := d.CLI("diff", path)
			if code := harness.ExitCodeOf(err); code != tc.code {
				t.Errorf("diff exited %d (%v), want %d; output:\n%s", code, err, tc.code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}

	// Nothing was touched: the same containers run, never restarted.
	after, err := d.Pod(name)
	if err != nil {
		t.Fatal(err)
	}
	if after.UID != before.UID {
		t.Errorf("pod UID %s after the diffs, want %s", after.UID, before.UID)
	}
	for i, cs := range after.Status.ContainerStatuses {
		if cs.ContainerID != before.Status.ContainerStatuses[i].ContainerID || cs.RestartCount != 0 || cs.State.Running == nil {
			t.Errorf("container %s: %s, restartCount %d, running %v; want %s, 0, running",
				cs.Name, cs.ContainerID, cs.RestartCount, cs.State.Running != nil, before.Status.ContainerStatuses[i].ContainerID)
		}
	}
}
