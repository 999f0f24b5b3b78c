package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/pod"
)

// trappedFile is the file, in a container's root, that the tests' scripts
// create once their traps are set; see waitTrapped.
const trappedFile = "/tmp/trapped"

// idleScript keeps a container running until SIGTERM, which it exits 0 on
// at once: wait, unlike a foreground sleep, returns when a trapped signal
// arrives. It creates trappedFile once its trap is set.
const idleScript = `trap 'exit 0' TERM; : > ` + trappedFile + `; while true; do sleep 1 & wait $!; done`

// readFile returns the content of path, or "" when it cannot be read.
func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(b)
}

// waitFile waits until path holds want.
func waitFile(t *testing.T, path, want string) {
	t.Helper()
	waitFor(t, 20*time.Second, path, func() (bool, string) {
		got := readFile(path)
		return got == want, fmt.Sprintf("%s holds %q, want %q", path, got, want)
	})
}

func TestStartContainer(t *testing.T) {
	h := newHarness(t)
	hostDir := filepath.Join(t.TempDir(), "made", "here")
	roDir := t.TempDir()
	script := strings.Join([]string{
		`echo "out-$GREETING"`,
		`echo err-a >&2`,
		`pwd > /host/pwd`,
		`echo a > /shared/from-a`,
		`if echo x > /ro/x; then echo written > /host/ro; else echo refused > /host/ro; fi`,
		idleScript,
	}, "\n")
	p := h.decode("/m/app.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: app
  namespace: ns
spec:
  volumes:
  - name: host
    hostPath:
      path: %s
      type: DirectoryOrCreate
  - name: shared
    emptyDir: {}
  - name: ro
    hostPath:
      path: %s
      type: Directory
  containers:
  - name: a
    image: localhost/busybox:test
    command: [/bin/sh, -c]
    args: [%q]
    workingDir: /tmp
    env:
    - name: GREETING
      value: hello
    volumeMounts:
    - {name: host, mountPath: /host}
    - {name: shared, mountPath: /shared}
    - {name: ro, mountPath: /ro, readOnly: true}
  - name: b
    image: localhost/busybox:test
    command: [/bin/sh, -c, %q]
    volumeMounts:
    - {name: shared, mountPath: /shared}
`, hostDir, roDir, script, "while [ ! -e /shared/from-a ]; do sleep 1; done; cat /shared/from-a > /shared/b-saw; "+idleScript))
	sb := h.sandbox(p)
	a := h.start(p, sb, "a", 2)
	b := h.start(p, sb, "b", 0)

	if a.Pid == 0 || a.State != pod.TaskRunning {
		t.Fatalf("StartContainer(a) = %+v, want a pid and state running", a)
	}
	waitFor(t, 10*time.Second, "container a to run its command", func() (bool, string) {
		got, want := cmdline(t, a.Pid), []string{"/bin/sh", "-c", script}
		return slices.Equal(got, want), fmt.Sprintf("process %d runs %q, want %q", a.Pid, got, want)
	})
	env := environ(t, a.Pid)
	for _, want := range []string{"GREETING=hello", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"} {
		if !slices.Contains(env, want) {
			t.Errorf("container a's environment %q lacks %q", env, want)
		}
	}

	// The pod's containers share the sandbox's network, IPC and UTS
	// namespaces, and each has its own PID and mount namespaces.
	for _, c := range []pod.Record{a, b} {
		for _, ns := range []string{"net", "ipc", "uts"} {
			if got, want := nsLink(t, c.Pid, ns), h.podNS(sb, ns); got != want {
				t.Errorf("container %s in %s, want the sandbox's %s", c.Name, got, want)
			}
		}
		for _, ns := range []string{"pid", "mnt"} {
			if got, host := nsLink(t, c.Pid, ns), nsLink(t, "self", ns); got == host {
				t.Errorf("container %s in the host's %s, want its own", c.Name, got)
			}
		}
	}
	for _, ns := range []string{"pid", "mnt"} {
		if nsLink(t, a.Pid, ns) == nsLink(t, b.Pid, ns) {
			t.Errorf("containers a and b share %s, want one each", ns)
		}
	}

	// Volumes, seen from the host.
	waitFile(t, filepath.Join(hostDir, "pwd"), "/tmp\n")
	waitFile(t, filepath.Join(hostDir, "ro"), "refused\n")
	if _, err := os.Stat(filepath.Join(roDir, "x")); !os.IsNotExist(err) {
		t.Errorf("stat of %s/x: %v, want no such file: the mount is read-only", roDir, err)
	}
	emptyDir := filepath.Join(h.root, "pods", string(p.UID), "volumes", "empty-dir", "shared")
	waitFile(t, filepath.Join(emptyDir, "from-a"), "a\n")
	waitFile(t, filepath.Join(emptyDir, "b-saw"), "a\n")
	if fi, err := os.Stat(emptyDir); err != nil || fi.Mode().Perm() != 0o777 {
		t.Errorf("emptyDir %s: %v, mode %v, want mode 0777", emptyDir, err, fi.Mode())
	}

	// Output, in the kubelet's layout.
	logPath := filepath.Join(h.logs, fmt.Sprintf("ns_app-n_%s", p.UID), "a", "2.log")
	waitFor(t, 10*time.Second, "container a's output in "+logPath, func() (bool, string) {
		got := readFile(logPath)
		return strings.Contains(got, "out-hello\n") && strings.Contains(got, "err-a\n"), fmt.Sprintf("log holds %q", got)
	})
	if _, err := os.Stat(filepath.Join(h.logs, fmt.Sprintf("ns_app-n_%s", p.UID), "b", "0.log")); err != nil {
		t.Errorf("container b's log: %v", err)
	}

	// Records: what StartContainer returned and what the lists say.
	imageID := h.image.Name() + "@" + h.image.Target().Digest.String()
	want := map[string]pod.Record{
		sb.ID: {ID: sb.ID, Pod: p.Key(), PodUID: string(p.UID), Kind: pod.KindSandbox, Hash: p.SandboxHash, Pinned: true,
			State: pod.TaskRunning, NoPause: true},
		a.ID: {ID: a.ID, Pod: p.Key(), PodUID: string(p.UID), Kind: pod.KindApp, Name: "a",
			Hash: pod.ContainerHash(&p.Spec.Containers[0]), Attempt: 2, SandboxID: sb.ID,
			Image: "localhost/busybox:test", ImageID: imageID, State: pod.TaskRunning, Pid: a.Pid},
		b.ID: {ID: b.ID, Pod: p.Key(), PodUID: string(p.UID), Kind: pod.KindApp, Name: "b",
			Hash: pod.ContainerHash(&p.Spec.Containers[1]), Attempt: 0, SandboxID: sb.ID,
			Image: "localhost/busybox:test", ImageID: imageID, State: pod.TaskRunning, Pid: b.Pid},
	}
	for _, got := range []pod.Record{a, b} {
		checkRecord(t, "StartContainer", got, want[got.ID])
	}
	podRecs, err := h.rt.PodContainers(h.ctx(), p.Key())
	if err != nil {
		t.Fatalf("PodContainers(%s): %v", p.Key(), err)
	}
	allRecs, err := h.rt.AllContainers(h.ctx())
	if err != nil {
		t.Fatalf("AllContainers: %v", err)
	}
	for name, recs := range map[string][]pod.Record{"PodContainers": podRecs, "AllContainers": allRecs} {
		if len(recs) != len(want) {
			t.Errorf("%s = %d records %+v, want %d", name, len(recs), recs, len(want))
		}
		for _, got := range recs {
			w, ok := want[got.ID]
			if !ok {
				t.Errorf("%s returned unknown container %+v", name, got)
				continue
			}
			checkRecord(t, name, got, w)
			if got.CreatedAt.IsZero() {
				t.Errorf("%s: container %s has no creation time", name, got.ID)
			}
		}
	}
	other, err := h.rt.PodContainers(h.ctx(), pod.Key{Namespace: "ns", Name: "other-n"})
	if err != nil || len(other) != 0 {
		t.Errorf("PodContainers(ns/other-n) = %+v, %v, want none", other, err)
	}
}

// checkRecord compares the fields of a record that do not depend on timing.
func checkRecord(t *testing.T, from string, got, want pod.Record) {
	t.Helper()
	got.CreatedAt, got.StartedAt, got.FinishedAt = time.Time{}, time.Time{}, time.Time{}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: record\n  %+v\nwant\n  %+v", from, got, want)
	}
}

// TestStartContainerBeforeSandbox: containers may start while a sandbox
// with a pause process (an earlier build's) is only created: they join the
// pinned namespaces, which the pause process then joins too.
func TestStartContainerBeforeSandbox(t *testing.T) {
	h := newHarness(t)
	p := h.decode("/m/early.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: early
spec:
  containers:
  - name: c
    image: localhost/busybox:test
    command: [/bin/sh, -c, %q]
`, idleScript))
	created := h.pauseCreated(p)
	c := h.start(p, created, "c", 0)
	sb := h.startSandbox(created)
	for _, ns := range []string{"net", "ipc", "uts"} {
		if got, want := nsLink(t, c.Pid, ns), nsLink(t, sb.Pid, ns); got != want {
			t.Errorf("container in %s, want the sandbox's %s", got, want)
		}
	}
	if got := utsHostname(t, c.Pid); got != "early-n" {
		t.Errorf("container host name = %q, want early-n", got)
	}
}

func TestRecordExited(t *testing.T) {
	h := newHarness(t)
	p := h.decode("/m/exit.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: exit
spec:
  containers:
  - name: c
    image: localhost/busybox:test
    command: [/bin/sh, -c, 'exit 5']
`)
	sb := h.sandbox(p)
	c := h.start(p, sb, "c", 1)
	// Nothing runs Exits: the state comes from the stopped task.
	var got pod.Record
	waitFor(t, 20*time.Second, "the container to exit", func() (bool, string) {
		recs, err := h.rt.PodContainers(h.ctx(), p.Key())
		if err != nil {
			return false, err.Error()
		}
		for _, r := range recs {
			if r.ID == c.ID {
				got = r
				return r.State == pod.TaskExited, fmt.Sprintf("record %+v", r)
			}
		}
		return false, fmt.Sprintf("no record of %s in %+v", c.ID, recs)
	})
	if got.ExitCode != 5 || got.FinishedAt.IsZero() || got.FinishedAt.Before(got.CreatedAt) {
		t.Errorf("exited record = %+v, want exit code 5 and a finish time after creation", got)
	}
	if got.Name != "c" || got.Attempt != 1 || got.SandboxID != sb.ID || got.Kind != pod.KindApp {
		t.Errorf("exited record = %+v, want container c attempt 1 of sandbox %s", got, sb.ID)
	}
}

func TestStartContainerImageErrors(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		name, image, policy, reason string
	}{
		{"never pull a missing image", "localhost/missing:1", "Never", "ErrImageNeverPull"},
		{"pull from nowhere", "127.0.0.1:1/x:1", "IfNotPresent", "ErrImagePull"},
		{"always pull from nowhere", "127.0.0.1:1/x:1", "Always", "ErrImagePull"},
	}
	p := h.decode("/m/img.yaml", podManifest(""))
	sb := h.sandbox(p)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := *h
			h.t = t
			c := p.Spec.Containers[0].DeepCopy()
			c.Image, c.ImagePullPolicy = tt.image, v1.PullPolicy(tt.policy)
			req := pod.ContainerRequest{Pod: p, Sandbox: sb, Container: c, Kind: pod.KindApp}
			rec, err := h.rt.StartContainer(h.ctx(), req)
			if err == nil {
				h.removeAtEnd(rec.ID)
				t.Fatalf("StartContainer(image %s, policy %s) = %+v, want an error", tt.image, tt.policy, rec)
			}
			if got := pod.WaitingReason(err, ""); got != tt.reason {
				t.Errorf("StartContainer(image %s, policy %s) error %q has reason %q, want %q", tt.image, tt.policy, err, got, tt.reason)
			}
			if !strings.Contains(err.Error(), tt.image) {
				t.Errorf("StartContainer(image %s) error %q does not name the image", tt.image, err)
			}
			if ids := h.containers(); !slices.Equal(ids, []string{sb.ID}) {
				t.Errorf("containers after the failure: %q, want only the sandbox %s", ids, sb.ID)
			}
			if keys := h.activeSnapshots(); len(keys) != 0 {
				t.Errorf("active snapshots after the failure: %q, want none", keys)
			}
		})
	}
}

// TestStartContainerUndo: a container whose process cannot start leaves
// nothing behind: no container, no task, no snapshot.
func TestStartContainerUndo(t *testing.T) {
	h := newHarness(t)
	p := h.decode("/m/undo.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: undo
spec:
  containers:
  - name: c
    image: localhost/busybox:test
    command: [/nonexistent]
`)
	sb := h.sandbox(p)
	rec, err := h.rt.StartContainer(h.ctx(), h.request(p, sb, "c", 0))
	if err == nil {
		h.removeAtEnd(rec.ID)
		t.Fatalf("StartContainer(command /nonexistent) = %+v, want an error", rec)
	}
	if got := pod.WaitingReason(err, ""); got != "RunContainerError" {
		t.Errorf("StartContainer(command /nonexistent) error %q has reason %q, want RunContainerError", err, got)
	}
	if ids := h.containers(); !slices.Equal(ids, []string{sb.ID}) {
		t.Errorf("containers after the failure: %q, want only the sandbox %s", ids, sb.ID)
	}
	if keys := h.activeSnapshots(); len(keys) != 0 {
		t.Errorf("active snapshots after the failure: %q, want none", keys)
	}
	tasks, err := h.client.TaskService().List(h.nsCtx(), nil)
	if err != nil {
		t.Fatalf("listing tasks: %v", err)
	}
	if len(tasks.Tasks) != 0 {
		t.Errorf("tasks after the failure: %+v, want none (the sandbox has no pause process)", tasks.Tasks)
	}
}

// TestSharedShim: a pod's sandbox and containers share one shim process;
// another ordinary pod of the same QoS class shares it too (TestShimGroups).
func TestSharedShim(t *testing.T) {
	h := newHarness(t)
	manifest := func(name string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  containers:
  - name: a
    image: localhost/busybox:test
    command: [sleep, "3600"]
  - name: b
    image: localhost/busybox:test
    command: [sleep, "3600"]
`, name)
	}
	p := h.decode("/m/shim1.yaml", manifest("one"))
	sb := h.sandbox(p)
	h.start(p, sb, "a", 0)
	h.start(p, sb, "b", 0)
	if n := shimCount(t, h.env.Address); n != 1 {
		t.Errorf("a sandbox and two containers run under %d shims, want 1", n)
	}
	q := h.decode("/m/shim2.yaml", manifest("two"))
	sb2 := h.sandbox(q)
	h.start(q, sb2, "a", 0)
	if n := shimCount(t, h.env.Address); n != 1 {
		t.Errorf("two BestEffort pods run under %d shims, want 1", n)
	}
}
