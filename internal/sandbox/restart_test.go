package sandbox

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/staticlet/staticlet/internal/pod"
)

// TestExitsAcrossContainerdRestart restarts containerd under a running
// container: Exits subscribes again and says that exits may have been
// missed (an empty TaskExit), the container's task is still there,
// reconnected to its shim, and its exit afterwards is reported as usual.
// Each containerd release reloads its shims on start in its own way, so
// this runs against every daemon make test runs.
func TestExitsAcrossContainerdRestart(t *testing.T) {
	h := newHarness(t)
	p := h.decode("/m/restart.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: restart
  namespace: ns
spec:
  containers:
  - name: c
    image: localhost/busybox:test
    command: [/bin/sh, -c, 'while [ ! -e /tmp/go ]; do sleep 0.1; done; exit 5']
`)
	sb := h.sandbox(p)
	exits := h.runExits()
	c := h.start(p, sb, "c", 0)

	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := h.env.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if e := nextExit(t, exits); e != (pod.TaskExit{}) {
		t.Fatalf("first TaskExit after the restart = %+v, want the empty one that says exits may have been missed", e)
	}
	recs, err := h.rt.PodContainers(h.ctx(), p.Key())
	if err != nil {
		t.Fatalf("PodContainers(%s) after the restart: %v", p.Key(), err)
	}
	for _, r := range recs {
		if r.State != pod.TaskRunning || (r.Pid == 0) != r.NoPause {
			t.Errorf("after the restart, container %s = %+v, want running", r.ID, r)
		}
	}

	// The container ends by itself once the file exists.
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/root/tmp/go", c.Pid), nil, 0o644); err != nil {
		t.Fatalf("telling the container to exit: %v", err)
	}
	e := nextExit(t, exits)
	if e.ContainerID != c.ID || e.Pod != p.Key() || e.ExitCode != 5 {
		t.Errorf("TaskExit after the restart = %+v, want container %s of pod %s with exit code 5", e, c.ID, p.Key())
	}
}
