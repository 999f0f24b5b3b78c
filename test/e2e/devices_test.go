package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// mknodNull makes a char device with the numbers of /dev/null at path,
// removed when the test ends.
func mknodNull(t *testing.T, path string) {
	t.Helper()
	if err := unix.Mknod(path, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatalf("mknod %s: %v", path, err)
	}
	t.Cleanup(func() { os.Remove(path) })
}

// devicePod is a pod whose container writes to out/<name>, for each of
// paths, whether it sees it and can write to it, then sleeps. meta goes
// under metadata, resources and security under the container.
func devicePod(name, out, meta, container string, paths ...string) string {
	var b strings.Builder
	for _, p := range paths {
		fmt.Fprintf(&b, "if [ ! -e %[1]s ]; then echo absent; elif echo x > %[1]s; then echo written; else echo refused; fi >> /out/%[2]s.tmp; ", p, name)
	}
	fmt.Fprintf(&b, "mv /out/%[1]s.tmp /out/%[1]s; exec sleep 100000", name)
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
%s
spec:
  terminationGracePeriodSeconds: 1
  volumes:
  - name: out
    hostPath: {path: %s}
  containers:
  - name: c
    image: localhost/busybox:test
    command: [sh, -c, %q]
%s
    volumeMounts: [{name: out, mountPath: /out}]
`, name, meta, out, b.String(), container)
}

// waitProbe waits until the probe of pod name in out says want.
func waitProbe(t *testing.T, out, name, want string) {
	t.Helper()
	harness.WaitFor(t, 30*time.Second, name+"'s devices", func() (bool, string) {
		b, _ := os.ReadFile(filepath.Join(out, name))
		return string(b) == want, fmt.Sprintf("%s says %q, want %q", name, b, want)
	})
}

// TestDevicesPrivileged checks that a privileged pod sees a device node
// made on the host, and may write to it, and that another pod does not
// see it.
func TestDevicesPrivileged(t *testing.T) {
	e := harness.NewEnv(t)
	dev := fmt.Sprintf("/dev/staticlet-e2e-%d", os.Getpid())
	mknodNull(t, dev)
	out := t.TempDir()
	d := e.Start()
	e.Write("priv.yaml", devicePod("priv", out, "", "    securityContext: {privileged: true}", dev))
	e.Write("plain.yaml", devicePod("plain", out, "", "", dev))
	waitProbe(t, out, "priv", "written\n")
	waitProbe(t, out, "plain", "absent\n")
	d.WaitPod("priv-"+harness.TestNode, 30*time.Second, "running", harness.Running)
}

// TestDevicesCDI runs pods asking for devices of a test vendor's CDI
// spec: two devices, three pods asking for one each, a pod naming all of
// them by annotation; a kill -9 of staticlet and a restart keep every
// allocation; removing a pod lets the waiting one start.
func TestDevicesCDI(t *testing.T) {
	e := harness.NewEnv(t)
	devDir, specDir, out := t.TempDir(), t.TempDir(), t.TempDir()
	spec := "cdiVersion: 0.6.0\nkind: example.test/dev\ndevices:\n"
	for i := range 2 {
		host := filepath.Join(devDir, fmt.Sprintf("dev%d", i))
		mknodNull(t, host)
		spec += fmt.Sprintf("- name: d%d\n  containerEdits:\n    deviceNodes:\n    - {path: /dev/exdev%[1]d, hostPath: %s}\n", i, host)
	}
	if err := os.WriteFile(filepath.Join(specDir, "example.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	d := e.Start("--cdi-spec-dirs", specDir)
	limit := "    resources: {limits: {example.test/dev: 1}}"
	nodes := []string{"/dev/exdev0", "/dev/exdev1"}
	e.Write("a.yaml", devicePod("a", out, "", limit, nodes...))
	waitProbe(t, out, "a", "written\nabsent\n")
	e.Write("b.yaml", devicePod("b", out, "", limit, nodes...))
	waitProbe(t, out, "b", "absent\nwritten\n")
	e.Write("c.yaml", devicePod("c", out, "", limit, nodes...))
	e.Write("all.yaml", devicePod("all", out, "  annotations: {cdi.k8s.io/test: example.test/dev=all}", "", nodes...))
	waitProbe(t, out, "all", "written\nwritten\n")
	waiting := func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return p.Status.Phase == v1.PodPending && len(cs) == 1 && cs[0].State.Waiting != nil &&
			cs[0].State.Waiting.Reason == "InsufficientDevices" && strings.Contains(cs[0].State.Waiting.Message, "example.test/dev")
	}
	d.WaitPod("c-"+harness.TestNode, 30*time.Second, "waiting for a device", waiting)

	before := podStates(t, e, d, []string{"a", "b"}, "running")
	d.Kill()
	d2 := e.Start("--cdi-spec-dirs", specDir)
	after := podStates(t, e, d2, []string{"a", "b"}, "adopted")
	for n, s := range before {
		if after[n] != s {
			t.Errorf("pod %s after a restart = %+v, want %+v (unchanged)", n, after[n], s)
		}
	}
	d2.WaitPod("c-"+harness.TestNode, 30*time.Second, "still waiting for a device", waiting)

	e.Remove("a.yaml")
	d2.WaitPod("c-"+harness.TestNode, 90*time.Second, "running on a's device", harness.Running)
	waitProbe(t, out, "c", "written\nabsent\n")
}
