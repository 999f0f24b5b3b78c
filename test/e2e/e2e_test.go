package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/errdefs"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// sharingPID makes the pod of manifest share a PID namespace among its
// containers: its sandbox has a pause process, their PID 1.
func sharingPID(manifest string) string {
	return strings.Replace(manifest, "\nspec:\n", "\nspec:\n  shareProcessNamespace: true\n", 1)
}

// TestPodLifecycle drops, edits and deletes a manifest and checks the
// container processes, the status socket, the CLI and sd_notify.
func TestPodLifecycle(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	e.Write("web.yaml", harness.SleeperPod("web", "first", false))

	p := d.WaitPod("web-"+harness.TestNode, 30*time.Second, "pod running", harness.Running)
	pid, err := e.PidOf(p.Status.ContainerStatuses[0])
	if err != nil || !harness.ProcessRunning(pid) {
		t.Fatalf("container process of %s: pid %d, err %v", p.Name, pid, err)
	}
	waitArgs(t, pid, "first")
	out, err := d.CLI("get", "pods")
	if err != nil || !strings.Contains(out, "web-"+harness.TestNode) || !strings.Contains(out, "1/1") || !strings.Contains(out, "Running") {
		t.Errorf("staticlet get pods = %q, %v; want web-%s 1/1 Running", out, err, harness.TestNode)
	}
	if out, err := d.CLI("describe", "pod", "-n", "default", "web-"+harness.TestNode); err != nil || !strings.Contains(out, "Name:         web-"+harness.TestNode) {
		t.Errorf("describe pod -n default = %q, %v", out, err)
	}
	if out, err := d.CLI("get", "pods", "-n", "kube-system"); err != nil || strings.Contains(out, "web-") {
		t.Errorf("get pods -n kube-system = %q, %v; want no pod of default", out, err)
	}
	if _, ok := d.Notify.Has("READY=1"); !ok {
		t.Errorf("NOTIFY_SOCKET got %q, want READY=1", d.Notify.Lines())
	}
	// WATCHDOG_USEC is 2s: a ping every second while the loop turns.
	harness.WaitFor(t, 5*time.Second, "WATCHDOG=1", func() (bool, string) {
		_, ok := d.Notify.Has("WATCHDOG=1")
		return ok, strings.Join(d.Notify.Lines(), " | ")
	})
	harness.WaitFor(t, 5*time.Second, "STATUS= counting the pod", func() (bool, string) {
		line, _ := d.Notify.Has("STATUS=")
		return strings.Contains(line, "1 pod") && strings.Contains(line, "1 running"), line
	})

	// Edit: the container is replaced by one with the new args.
	oldID := p.Status.ContainerStatuses[0].ContainerID
	e.Write("web.yaml", harness.SleeperPod("web", "second", false))
	p = d.WaitPod("web-"+harness.TestNode, 30*time.Second, "new container running", func(p *v1.Pod) bool {
		return harness.Running(p) && p.Status.ContainerStatuses[0].ContainerID != oldID
	})
	newPid, err := e.PidOf(p.Status.ContainerStatuses[0])
	if err != nil {
		t.Fatal(err)
	}
	waitArgs(t, newPid, "second")
	if harness.ProcessRunning(pid) {
		t.Errorf("old container process %d still runs after the edit", pid)
	}
	if _, err := e.Client.LoadContainer(harness.NSCtx(context.Background()), strings.TrimPrefix(oldID, "containerd://")); !errdefs.IsNotFound(err) {
		t.Errorf("old container %s still exists after the edit (err %v)", oldID, err)
	}

	// A pod-level edit (a label) replaces the whole pod: a new sandbox, and
	// the old container gone before the new one started.
	oldSandbox := sandboxID(e, t)
	oldStatus := p.Status.ContainerStatuses[0]
	e.Write("web.yaml", strings.Replace(harness.SleeperPod("web", "second", false), "  name: web\n", "  name: web\n  labels:\n    tier: two\n", 1))
	p = d.WaitPod("web-"+harness.TestNode, 30*time.Second, "pod replaced", func(p *v1.Pod) bool {
		return harness.Running(p) && p.Labels["tier"] == "two" && p.Status.ContainerStatuses[0].ContainerID != oldStatus.ContainerID
	})
	if sandboxID(e, t) == oldSandbox {
		t.Errorf("sandbox %s kept after a pod-level edit", oldSandbox)
	}
	if harness.ProcessRunning(newPid) {
		t.Errorf("old container process %d still runs after the pod was replaced", newPid)
	}
	if got := p.Status.ContainerStatuses[0].RestartCount; got != 0 {
		t.Errorf("restartCount %d after the pod was replaced, want 0 (a new pod)", got)
	}
	newPid, err = e.PidOf(p.Status.ContainerStatuses[0])
	if err != nil {
		t.Fatal(err)
	}
	var stopped, started time.Time
	events, _ := d.Client().Events(t.Context(), "")
	for _, ev := range events {
		if ev.Reason == "Killing" && ev.Container == "main" {
			stopped = ev.Time
		}
		if ev.Reason == "Started" {
			started = ev.Time
		}
	}
	if !started.After(stopped) {
		t.Errorf("new container started at %s, not after the old one was stopped at %s", started, stopped)
	}

	// Delete: nothing of the pod is left.
	uid := string(p.UID)
	netns := sandboxNetns(e, t)
	if ctrNetns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", newPid)); ctrNetns != netns {
		t.Errorf("container in network namespace %s, its sandbox in %s", ctrNetns, netns)
	}
	if host, _ := os.Readlink("/proc/1/ns/net"); host == netns {
		t.Errorf("pod without hostNetwork is in the host's network namespace")
	}
	e.Remove("web.yaml")
	harness.WaitFor(t, 30*time.Second, "pod gone from the status", func() (bool, string) {
		_, err := d.Pod("web-" + harness.TestNode)
		return err != nil, "still listed"
	})
	harness.WaitFor(t, 10*time.Second, "no containers left", func() (bool, string) {
		cs := e.Containers(context.Background())
		return len(cs) == 0, strings.Join(harness.IDs(cs), ",")
	})
	if harness.ProcessRunning(newPid) {
		t.Errorf("container process %d still runs after the manifest was removed", newPid)
	}
	ctx := harness.NSCtx(context.Background())
	tasks, err := e.Client.TaskService().List(ctx, &tasks.ListTasksRequest{})
	if err == nil && len(tasks.Tasks) > 0 {
		t.Errorf("%d tasks left after delete", len(tasks.Tasks))
	}
	n := 0
	_ = e.Client.SnapshotService(e.Ctrd.Snapshotter).Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		if info.Kind == snapshots.KindActive {
			n++
		}
		return nil
	})
	if n > 0 {
		t.Errorf("%d active snapshots left after delete", n)
	}
	if holders := processesInNetns(netns); len(holders) > 0 {
		t.Errorf("network namespace %s of the deleted pod still has processes %v", netns, holders)
	}
	if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), netns) || strings.Contains(string(mounts), e.Root) {
		t.Errorf("a mount of the deleted pod's namespaces is left:\n%s", mounts)
	}
	if _, err := os.Stat(filepath.Join(e.Root, "pods", uid)); !os.IsNotExist(err) {
		t.Errorf("pod directory of %s left after delete (stat err %v)", uid, err)
	}
	if !d.Running() {
		t.Fatal("staticlet exited")
	}
}

// waitArgs waits for process pid to run with arg among its arguments: right
// after a start the process may still be runc's init, about to exec.
func waitArgs(t *testing.T, pid int, arg string) {
	t.Helper()
	harness.WaitFor(t, 5*time.Second, "process args holding "+arg, func() (bool, string) {
		args := harness.Cmdline(pid)
		return slices.Contains(args, arg), fmt.Sprintf("%q", args)
	})
}

// sandboxID returns the ID of the only sandbox.
func sandboxID(e *harness.Env, t *testing.T) string {
	t.Helper()
	cs, err := e.Client.Containers(harness.NSCtx(context.Background()), `labels."io.staticlet.kind"==sandbox`)
	if err != nil || len(cs) != 1 {
		t.Fatalf("sandboxes: %d, %v; want 1", len(cs), err)
	}
	return cs[0].ID()
}

// sandboxNetns returns the network namespace of the only sandbox running,
// in the form of the /proc/PID/ns links: where it is pinned.
func sandboxNetns(e *harness.Env, t *testing.T) string {
	t.Helper()
	pin := filepath.Join(e.Root, "sandboxes", sandboxID(e, t), "net")
	var st syscall.Stat_t
	if err := syscall.Stat(pin, &st); err != nil {
		t.Fatalf("the network namespace of the sandbox: %v", err)
	}
	return fmt.Sprintf("net:[%d]", st.Ino)
}

// processesInNetns lists the processes in network namespace ns ("net:[N]").
func processesInNetns(ns string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/ns/net")
	for _, p := range procs {
		if l, err := os.Readlink(p); err == nil && l == ns {
			out = append(out, strings.Split(p, "/")[2])
		}
	}
	return out
}
