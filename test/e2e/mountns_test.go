package e2e

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/logs"
	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// What a staticlet needs to run in a mount namespace (a container) of its
// own while containerd and its shims run on the host: no cgroup writes of
// its own, and a log driver the shims find.

const limitedPod = `apiVersion: v1
kind: Pod
metadata:
  name: limited
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: localhost/busybox:test
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
    resources:
      requests: {cpu: 100m, memory: 32Mi}
      limits: {cpu: 200m, memory: 64Mi}
`

// TestCgroupsPerQOSOff: with --cgroups-per-qos=false, as the kubelet, a
// Burstable pod gets no QoS-class or pod cgroup: its container's cgroup is
// directly under /staticlet, with the container's own limits.
func TestCgroupsPerQOSOff(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start("--cgroups-per-qos=false")
	e.Write("limited.yaml", limitedPod)
	p := d.WaitPod("limited-"+harness.TestNode, 60*time.Second, "pod running", harness.Running)
	cs := p.Status.ContainerStatuses[0]
	pid, err := e.PidOf(cs)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimPrefix(cs.ContainerID, "containerd://")
	want := "/" + harness.TestNS + "/" + id
	cg := procCgroups(t, pid)
	got := cg["memory"]
	if unifiedMode() {
		got = cg[""]
	}
	if got != want {
		t.Fatalf("container cgroup = %q, want %q (all: %v)", got, want, cg)
	}
	limit := strconv.Itoa(64 << 20)
	if unifiedMode() {
		expectFile(t, "container", "/sys/fs/cgroup"+want+"/memory.max", limit)
	} else {
		expectFile(t, "container", "/sys/fs/cgroup/memory"+want+"/memory.limit_in_bytes", limit)
	}
	if sb := sandboxCgroup(e, t, string(p.UID)); filepath.Dir(sb) != "/"+harness.TestNS {
		t.Errorf("sandbox cgroup = %q, want one directly under /%s", sb, harness.TestNS)
	}
	for _, qos := range []string{"", "burstable", "besteffort"} {
		if left := cgroupDirs(filepath.Join("/", harness.TestNS, qos, "pod"+string(p.UID))); len(left) > 0 {
			t.Errorf("pod cgroups %v exist; want none with --cgroups-per-qos=false", left)
		}
	}
}

// TestLogDriverFromRootDir: the shim runs each container's log forwarder
// from under --root-dir (bin/log-forwarder, where a shim in another mount
// namespace finds it too), and the container's output reaches its log.
func TestLogDriverFromRootDir(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	e.Write("web.yaml", harness.SleeperPod("web", "first", true))
	d.WaitPod("web-"+harness.TestNode, 60*time.Second, "pod running", harness.Running)
	copyPath := filepath.Join(e.Root, "bin", "log-forwarder")
	var drivers [][]string
	harness.WaitFor(t, 30*time.Second, "the log driver of web's container", func() (bool, string) {
		drivers = logDriversUnder(e.Logs)
		return len(drivers) > 0, "none"
	})
	for _, args := range drivers {
		if args[0] != copyPath {
			t.Errorf("log driver runs as %q, want the copy %s", args, copyPath)
		}
	}
	// Output written by the container, through that driver.
	e.Write("hello.yaml", strings.Replace(harness.SleeperPod("hello", "x", true),
		`["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done", "x"]`,
		`["sh", "-c", "echo hello from the driver; trap 'exit 0' TERM; while true; do sleep 1; done"]`, 1))
	d.WaitPod("hello-"+harness.TestNode, 60*time.Second, "pod running", harness.Running)
	harness.WaitFor(t, 30*time.Second, "the container's line in its log", func() (bool, string) {
		out, err := d.CLI("logs", "hello-"+harness.TestNode)
		return err == nil && strings.Contains(out, "hello from the driver"), out
	})
}

// logDriversUnder lists the command lines of the log driver processes
// writing under dir, in the order of their process IDs.
func logDriversUnder(dir string) [][]string {
	procs := logDriverProcs(dir)
	var out [][]string
	for _, pid := range slices.Sorted(maps.Keys(procs)) {
		out = append(out, procs[pid])
	}
	return out
}

// logDriverProcs maps the log driver processes writing under dir to their
// command lines.
func logDriverProcs(dir string) map[int][]string {
	entries, _ := os.ReadDir("/proc")
	out := map[int][]string{}
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		args := harness.Cmdline(pid)
		if len(args) < 2 || !logs.IsDriver(args[1:]) {
			continue
		}
		if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, dir+"/") }) {
			out[pid] = args
		}
	}
	return out
}
