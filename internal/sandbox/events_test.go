package sandbox

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"

	"github.com/staticlet/staticlet/internal/pod"
)

// runExits runs the Runtime's Exits until the test ends and returns what
// it sends.
func (h *harness) runExits() <-chan pod.TaskExit {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan pod.TaskExit, 16)
	errc := make(chan error, 1)
	go func() { errc <- h.rt.Exits(ctx, out) }()
	h.t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			h.t.Errorf("Exits: %v", err)
		}
	})
	return out
}

// nextExit returns the next exit Exits sends.
func nextExit(t *testing.T, exits <-chan pod.TaskExit) pod.TaskExit {
	t.Helper()
	select {
	case e := <-exits:
		return e
	case <-time.After(20 * time.Second):
		t.Fatal("no TaskExit within 20s")
		return pod.TaskExit{}
	}
}

func TestExits(t *testing.T) {
	h := newHarness(t)
	p := h.decode("/m/exits.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: exits
  namespace: ns
spec:
  containers:
  - name: c
    image: localhost/busybox:test
    command: [/bin/sh, -c, 'sleep 1; exit 3']
`)
	sb := h.pauseSandbox(p) // an earlier build's: its pause's exit is told below
	// Exits subscribes in a few milliseconds; the container lives a second,
	// so its exit comes after the subscription.
	exits := h.runExits()
	c := h.start(p, sb, "c", 0)

	e := nextExit(t, exits)
	if e.ContainerID != c.ID || e.Pod != p.Key() || e.ExitCode != 3 || e.ExitedAt.IsZero() {
		t.Fatalf("TaskExit = %+v, want container %s of pod %s, exit code 3 and a time", e, c.ID, p.Key())
	}

	// After telling, Exits records the exit in the container's labels and
	// deletes the task, so the shim can go.
	ctr, err := h.client.LoadContainer(h.nsCtx(), c.ID)
	if err != nil {
		t.Fatalf("loading container %s: %v", c.ID, err)
	}
	waitFor(t, 10*time.Second, "the exit to be recorded", func() (bool, string) {
		labels, err := ctr.Labels(h.nsCtx())
		if err != nil {
			return false, err.Error()
		}
		_, terr := ctr.Task(h.nsCtx(), nil)
		return labels[LabelExitCode] == "3" && errdefs.IsNotFound(terr),
			fmt.Sprintf("exit code label %q, loading the task: %v", labels[LabelExitCode], terr)
	})
	recs, err := h.rt.PodContainers(h.ctx(), p.Key())
	if err != nil {
		t.Fatalf("PodContainers(%s): %v", p.Key(), err)
	}
	found := false
	for _, r := range recs {
		if r.ID != c.ID {
			continue
		}
		found = true
		if r.State != pod.TaskExited || r.ExitCode != 3 || !r.FinishedAt.Equal(e.ExitedAt) || r.Pid != 0 {
			t.Errorf("record after the exit = %+v, want exited with code 3 at %v and no pid", r, e.ExitedAt)
		}
	}
	if !found {
		t.Errorf("PodContainers(%s) = %+v, want container %s among them", p.Key(), recs, c.ID)
	}

	// The sandbox's pause process exits 0 when stopped, and its exit is
	// reported like any other.
	if err := h.rt.StopContainer(h.ctx(), sb.ID, 10*time.Second); err != nil {
		t.Fatalf("StopContainer(sandbox): %v", err)
	}
	e = nextExit(t, exits)
	if e.ContainerID != sb.ID || e.Pod != p.Key() || e.ExitCode != 0 {
		t.Errorf("TaskExit = %+v, want sandbox %s of pod %s with exit code 0", e, sb.ID, p.Key())
	}
}

// TestSettleExitOutlastsCancel: an exit is recorded and its task deleted
// even when Exits' context has ended, as when staticlet stops right after
// the node shutdown stopped the pods.
func TestSettleExitOutlastsCancel(t *testing.T) {
	h := newHarness(t)
	p := h.decode("/m/settle.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: settle
  namespace: ns
spec:
  containers:
  - name: c
    image: localhost/busybox:test
    command: [/bin/sh, -c, 'exit 4']
`)
	c := h.start(p, h.sandbox(p), "c", 0)
	ctr, err := h.client.LoadContainer(h.nsCtx(), c.ID)
	if err != nil {
		t.Fatalf("loading container %s: %v", c.ID, err)
	}
	exitedAt := h.waitStopped(ctr)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	exit := pod.TaskExit{Pod: p.Key(), ContainerID: c.ID, ExitCode: 4, ExitedAt: exitedAt}
	if err := h.rt.settleExit(ctx, ctr, exit, c.Pid); err != nil {
		t.Fatalf("settleExit with an ended context: %v", err)
	}
	labels, err := ctr.Labels(h.nsCtx())
	if err != nil || labels[LabelExitCode] != "4" {
		t.Errorf("exit code label %q, %v; want 4", labels[LabelExitCode], err)
	}
	if _, err := ctr.Task(h.nsCtx(), nil); !errdefs.IsNotFound(err) {
		t.Errorf("loading the task after settleExit: %v, want not found", err)
	}
}

// waitStopped waits until ctr's task has stopped, its exit not settled
// yet (no Exits runs), and returns when it exited.
func (h *harness) waitStopped(ctr client.Container) time.Time {
	h.t.Helper()
	var exitedAt time.Time
	waitFor(h.t, 10*time.Second, "the container's exit", func() (bool, string) {
		task, err := ctr.Task(h.nsCtx(), nil)
		if err != nil {
			return false, err.Error()
		}
		st, err := task.Status(h.nsCtx())
		exitedAt = st.ExitTime
		return err == nil && st.Status == client.Stopped, fmt.Sprintf("status %v, %v", st.Status, err)
	})
	return exitedAt
}
