package e2e

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// dynamicBinary returns staticlet built as a plain `go build` (or `go
// install`) builds it where a C compiler is found: with cgo, dynamically
// linked against the C library. It is built once per test binary.
func dynamicBinary(t *testing.T) string {
	t.Helper()
	dynamicOnce.Do(func() {
		if _, err := exec.LookPath("gcc"); err != nil {
			dynamicErr = fmt.Errorf("no C compiler for a cgo build (make deps installs gcc): %w", err)
			return
		}
		dynamicPath, dynamicErr = harness.BuildStaticlet("1")
	})
	if dynamicErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(dynamicErr)
		}
		t.Skip(dynamicErr)
	}
	f, err := elf.Open(dynamicPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dynamic := false
	for _, p := range f.Progs {
		dynamic = dynamic || p.Type == elf.PT_INTERP
	}
	if !dynamic {
		t.Fatalf("%s built with CGO_ENABLED=1 has no program interpreter: not dynamically linked", dynamicPath)
	}
	return dynamicPath
}

var (
	dynamicOnce sync.Once
	dynamicPath string
	dynamicErr  error
)

// TestDynamicBuild runs a pod with a dynamically linked staticlet, whose
// copy is the log driver of the pod's containers: the built-in pause of a
// pod sharing its PID namespace runs,
// the app is started once with its log driver running, and the sandbox is
// neither restarted nor re-created. Every other end-to-end test runs the
// static build make makes.
func TestDynamicBuild(t *testing.T) {
	bin := dynamicBinary(t)
	e := harness.NewEnv(t)
	e.Bin = bin
	d := e.Start()
	e.Write("web.yaml", sharingPID(harness.SleeperPod("web", "first", false)))

	name := "web-" + harness.TestNode
	p := d.WaitPod(name, 60*time.Second, "pod running with its sandbox up", func(p *v1.Pod) bool {
		return harness.Running(p) && sandboxReady(p)
	})
	sb := sandboxID(e, t)
	pid := sandboxPid(e, t, sb)
	if !harness.ProcessRunning(pid) {
		t.Fatalf("pause process %d of sandbox %s is not running", pid, sb)
	}
	if got := harness.Cmdline(pid); len(got) == 0 || got[len(got)-1] != "pause" {
		t.Errorf("pause process %d runs %q, want the pause program", pid, got)
	}
	harness.WaitFor(t, 30*time.Second, "the log driver of web's container", func() (bool, string) {
		drivers := logDriversUnder(e.Logs)
		return len(drivers) == 1, fmt.Sprintf("log drivers %q", drivers)
	})
	// Two more passes over the pod (a resync every 5s) find nothing to
	// do: no sandbox restarted or re-created, the app as it was.
	passes := syncs(d, "default/"+name)
	harness.WaitFor(t, 30*time.Second, "two more passes over the pod", func() (bool, string) {
		n := syncs(d, "default/"+name)
		return n >= passes+2, fmt.Sprintf("%d passes", n-passes)
	})
	events := waitEvents(d, t, "default/"+name, time.Second, "the events", func([]podEvent) bool { return true })
	for _, bad := range []string{"SandboxChanged", "SandboxExited", "FailedCreatePodSandBox"} {
		if n := countReason(events, bad); n > 0 {
			t.Errorf("%d %s events with a dynamically linked build, want none: %v", n, bad, events)
		}
	}
	q, err := d.Pod(name)
	if err != nil {
		t.Fatal(err)
	}
	if sandboxID(e, t) != sb || q.Status.ContainerStatuses[0].ContainerID != p.Status.ContainerStatuses[0].ContainerID ||
		q.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("pod changed: sandbox %s -> %s, container %s -> %s, restarts %d", sb, sandboxID(e, t),
			p.Status.ContainerStatuses[0].ContainerID, q.Status.ContainerStatuses[0].ContainerID, q.Status.ContainerStatuses[0].RestartCount)
	}
}

// sandboxReady tells whether p's status says its sandbox runs.
func sandboxReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReadyToStartContainers {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// sandboxPid returns the pause process of sandbox id, which must have one.
func sandboxPid(e *harness.Env, t *testing.T, id string) int {
	t.Helper()
	pid := pauseOf(e, t, id)
	if pid == 0 {
		t.Fatalf("sandbox %s has no pause process", id)
	}
	return pid
}

// podEvent is an event as the tests look at it.
type podEvent struct{ reason, message string }

func (e podEvent) String() string { return e.reason + ": " + e.message }

// waitEvents waits until the events of pod (namespace/name) satisfy cond,
// and returns them.
func waitEvents(d *harness.Daemon, t *testing.T, pod string, timeout time.Duration, what string, cond func([]podEvent) bool) []podEvent {
	t.Helper()
	var evs []podEvent
	harness.WaitFor(t, timeout, what, func() (bool, string) {
		all, err := d.Client().Events(t.Context(), pod)
		if err != nil {
			return false, err.Error()
		}
		evs = evs[:0]
		for _, e := range all {
			evs = append(evs, podEvent{reason: e.Reason, message: e.Message})
		}
		return cond(evs), fmt.Sprint(evs)
	})
	return evs
}

// countReason counts the events with reason.
func countReason(evs []podEvent, reason string) int {
	n := 0
	for _, e := range evs {
		if e.reason == reason {
			n++
		}
	}
	return n
}

// withReason returns the messages of the events with reason.
func withReason(evs []podEvent, reason string) []string {
	var out []string
	for _, e := range evs {
		if e.reason == reason {
			out = append(out, e.message)
		}
	}
	return out
}

// syncs counts the passes the daemon logged over pod (namespace/name).
func syncs(d *harness.Daemon, pod string) int {
	n := 0
	for _, line := range strings.Split(d.Out.String(), "\n") {
		if strings.Contains(line, `msg="synced pod"`) && strings.Contains(line, "pod="+pod+" ") {
			n++
		}
	}
	return n
}

// TestSandboxPauseKilled kills the pause process of a pod whose containers
// share its PID namespace: their PID 1, whose death ends them too. The pod
// is re-created in a new sandbox, as the kubelet does, and the exit is
// told with its code.
func TestSandboxPauseKilled(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	e.Write("web.yaml", sharingPID(harness.SleeperPod("web", "first", false)))
	name := "web-" + harness.TestNode
	p := d.WaitPod(name, 30*time.Second, "pod running with its sandbox up", func(p *v1.Pod) bool {
		return harness.Running(p) && sandboxReady(p)
	})
	app := p.Status.ContainerStatuses[0]
	sb := sandboxID(e, t)
	pid := sandboxPid(e, t, sb)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing pause process %d: %v", pid, err)
	}
	d.WaitPod(name, 60*time.Second, "the pod running again in a new sandbox", func(p *v1.Pod) bool {
		return harness.Running(p) && sandboxReady(p) && p.Status.ContainerStatuses[0].ContainerID != app.ContainerID
	})
	if now := sandboxID(e, t); now == sb {
		t.Errorf("sandbox %s kept, want a new one", sb)
	}
	evs := waitEvents(d, t, "default/"+name, 5*time.Second, "the events", func([]podEvent) bool { return true })
	exits := withReason(evs, "SandboxExited")
	if len(exits) != 1 || !strings.Contains(exits[0], "exited with code 137") || !strings.Contains(exits[0], "the pod will be re-created") {
		t.Errorf("SandboxExited events = %q, want 1 with exit code 137 saying the pod is re-created", exits)
	}
	if n := countReason(evs, "SandboxChanged"); n != 1 {
		t.Errorf("%d SandboxChanged events, want 1: %v", n, evs)
	}
	if out, err := d.CLI("describe", "pod", name); err != nil || !strings.Contains(out, "SandboxExited") || !strings.Contains(out, "exited with code 137") {
		t.Errorf("describe pod = %q, %v; want the SandboxExited event", out, err)
	}
}

// TestSandboxWithoutPause: a pod that shares no PID namespace runs with no
// pause process: its sandbox is a record with no task, and no process runs
// from the pause root. Once its pinned network namespace is gone (a reboot
// takes them all), the pod is re-created in a new sandbox, and the event
// says why.
func TestSandboxWithoutPause(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	e.Write("web.yaml", harness.SleeperPod("web", "first", false))
	name := "web-" + harness.TestNode
	p := d.WaitPod(name, 30*time.Second, "pod running with its sandbox up", func(p *v1.Pod) bool {
		return harness.Running(p) && sandboxReady(p)
	})
	app := p.Status.ContainerStatuses[0]
	sb := sandboxID(e, t)
	ctx := harness.NSCtx(t.Context())
	c, err := e.Client.LoadContainer(ctx, sb)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Task(ctx, nil); !errdefs.IsNotFound(err) {
		t.Errorf("the task of sandbox %s: %v, want none", sb, err)
	}
	if pauses := pauseProcesses(e, t); len(pauses) != 0 {
		t.Errorf("pause processes %v, want none", pauses)
	}

	pin := filepath.Join(e.Root, "sandboxes", sb, "net")
	if err := syscall.Unmount(pin, syscall.MNT_DETACH); err != nil {
		t.Fatalf("unpinning the pod's network namespace: %v", err)
	}
	d.WaitPod(name, 60*time.Second, "the pod running again in a new sandbox", func(p *v1.Pod) bool {
		return harness.Running(p) && sandboxReady(p) && p.Status.ContainerStatuses[0].ContainerID != app.ContainerID
	})
	if now := sandboxID(e, t); now == sb {
		t.Errorf("sandbox %s kept, want a new one", sb)
	}
	evs := waitEvents(d, t, "default/"+name, 5*time.Second, "the events", func([]podEvent) bool { return true })
	gone := withReason(evs, "SandboxGone")
	if len(gone) != 1 || !strings.Contains(gone[0], "net namespace is no longer pinned") {
		t.Errorf("SandboxGone events = %q, want 1 saying the network namespace is gone", gone)
	}
	if n := countReason(evs, "SandboxChanged"); n != 1 {
		t.Errorf("%d SandboxChanged events, want 1: %v", n, evs)
	}
	if n := countReason(evs, "SandboxExited"); n != 0 {
		t.Errorf("%d SandboxExited events, want none: no process exited: %v", n, evs)
	}
}

// pauseProcesses lists the processes that run from staticlet's pause root.
func pauseProcesses(e *harness.Env, t *testing.T) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(e.Root, "pause", "rootfs")
	var out []int
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		if r, _ := os.Readlink(fmt.Sprintf("/proc/%d/root", pid)); r == root {
			out = append(out, pid)
		}
	}
	return out
}
