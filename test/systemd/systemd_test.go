package systemd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/debroot"
	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// hostPod is a pod a staticlet in a machine can run: on the host's
// network and IPC namespaces, as control-plane static pods are, since
// the namespaces staticlet would pin for a pod of its own are bind mounts
// in the machine's mount namespace, out of containerd's sight. Its
// readiness is an exec probe, whose output comes back through FIFOs under
// --root-dir.
const hostPod = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  hostNetwork: true
  hostIPC: true
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: localhost/busybox:test
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
    readinessProbe:
      exec:
        command: ["true"]
      periodSeconds: 1
`

// staticletMachine is a machine with staticlet's package installed and
// running against an env's containerd.
type staticletMachine struct {
	*machine
	e *harness.Env
}

// staticletOptions configure bootStaticlet.
type staticletOptions struct {
	// Args are flags added to those that point staticlet at the env.
	Args []string
	// Unit holds lines for the [Service] section of a drop-in.
	Unit string
	// Manifests are written into /etc/kubernetes/manifests: file name to
	// content.
	Manifests map[string]string
	// Files are written into the machine, readable by root alone: path
	// to content.
	Files map[string]string
}

// bootStaticlet installs the .deb into a fresh Debian root, configures
// the service for e's containerd and directories through
// /etc/default/staticlet (the package's own place for flags) and a unit
// drop-in, writes the manifests, and boots it.
func bootStaticlet(t *testing.T, e *harness.Env, opts staticletOptions) *staticletMachine {
	t.Helper()
	requireMachineTools(t)
	deb := harness.DebPackage(t)
	root := debianRoot(t)
	installDeb(t, root, deb)
	args := append([]string{
		"--containerd-address=" + e.Ctrd.Address,
		"--containerd-namespace=" + harness.TestNS,
		"--root-dir=" + e.Root,
		"--pod-logs-dir=" + e.Logs,
		"--node-name=" + harness.TestNode,
		"--file-check-frequency=5s",
		// The machine's cgroup file systems are not the host's: runc,
		// on the host, makes the containers' cgroups.
		"--cgroups-per-qos=false",
		// The image filesystem is the host's disk, whose use is no part
		// of these tests: above the default 85% the image GC warns.
		"--image-gc-high-threshold=100",
		"--image-gc-low-threshold=99",
		// So are the root dir and the logs: under the default 10% free
		// the node would report DiskPressure and warn.
		"--eviction-hard=nodefs.available<1%,nodefs.inodesFree<1%",
	}, e.Net.Flags()...)
	args = append(args, opts.Args...)
	writeRootFile(t, root, "/etc/default/staticlet", []byte(fmt.Sprintf("STATICLET_ARGS=%q\n", strings.Join(args, " "))))
	if opts.Unit != "" {
		writeRootFile(t, root, "/etc/systemd/system/staticlet.service.d/test.conf", []byte("[Service]\n"+opts.Unit+"\n"))
	}
	for name, content := range opts.Manifests {
		writeRootFile(t, root, filepath.Join("/etc/kubernetes/manifests", name), []byte(content))
	}
	for path, content := range opts.Files {
		writeRootFile(t, root, path, []byte(content))
		if err := os.Chmod(filepath.Join(root, path), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Same paths inside: the containerd socket (and its state), and the
	// root and logs directories the shims on the host use too.
	m := bootMachine(t, root, machineOptions{Binds: []string{e.Ctrd.Dir, e.Dir}})
	return &staticletMachine{machine: m, e: e}
}

// status is systemctl status staticlet.
func (m *staticletMachine) status() string {
	out, _ := m.run("systemctl", "status", "--no-pager", "--lines=0", "staticlet")
	return out
}

// show returns one property of staticlet.service.
func (m *staticletMachine) show(property string) string {
	out, _ := m.run("systemctl", "show", "--value", "-p", property, "staticlet")
	return strings.TrimSpace(out)
}

// TestSystemd installs the .deb into a Debian root, boots it with systemd
// as PID 1 and checks staticlet as a service: enabled by the package,
// active with its sd_notify status, running the pod in the host's
// containerd, logging with priorities journald filters on, restarted by
// the watchdog when it hangs, with the pod left untouched.
func TestSystemd(t *testing.T) {
	requireMachineTools(t)
	e := harness.NewEnv(t)
	m := bootStaticlet(t, e, staticletOptions{
		Unit: "WatchdogSec=3s",
		Manifests: map[string]string{
			"web.yaml": hostPod,
			// A warning in the journal among info lines.
			"bad.yaml": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bad\nspec:\n  containerz: []\n",
		},
	})

	if out, err := m.run("systemctl", "is-enabled", "staticlet"); strings.TrimSpace(out) != "enabled" {
		t.Errorf("systemctl is-enabled staticlet = %q, %v; want enabled (by the package's postinst)", out, err)
	}
	if out, err := m.run("systemd-analyze", "verify", "/lib/systemd/system/staticlet.service"); err != nil || out != "" {
		t.Errorf("systemd-analyze verify staticlet.service: %v\n%s", err, out)
	}
	const wantStatus = `Status: "1 pod: 1 running, 1 ready; 1 manifest error"`
	var status string
	harness.WaitFor(t, 90*time.Second, "systemctl status staticlet: active (running), "+wantStatus, func() (bool, string) {
		status = m.status()
		return strings.Contains(status, "Active: active (running)") && strings.Contains(status, wantStatus), status
	})
	t.Logf("systemctl status staticlet:\n%s", status)

	// The pod runs in the host's containerd, and the CLI inside sees it.
	name := "web-" + harness.TestNode
	before := m.pod(name)
	if len(before.Status.ContainerStatuses) != 1 {
		t.Fatalf("pod %s: %s; want one container", name, harness.Describe(before))
	}
	id, pid := task(e, t, before.Status.ContainerStatuses[0])
	if out, err := m.run("staticlet", "get", "pods"); err != nil || !strings.Contains(out, name) ||
		!strings.Contains(out, "1/1") || !strings.Contains(out, "Running") {
		t.Errorf("staticlet get pods inside = %q, %v; want %s 1/1 Running", out, err, name)
	}

	// Log lines carry their priority: -p warning has the bad manifest's
	// warning and none of the info lines.
	warnings, _ := m.run("journalctl", "-t", "staticlet", "-p", "warning", "-o", "cat", "--no-pager")
	all, _ := m.run("journalctl", "-t", "staticlet", "-o", "cat", "--no-pager")
	if !strings.Contains(warnings, "level=WARN") || !strings.Contains(warnings, "bad.yaml") {
		t.Errorf("journalctl -t staticlet -p warning = %q, want the warning about bad.yaml", warnings)
	}
	if strings.Contains(warnings, "staticlet started") || !strings.Contains(all, "staticlet started") {
		t.Errorf("journalctl -t staticlet: the info line \"staticlet started\" in -p warning %q, in all %q; want it only in all", warnings, all)
	}

	// A staticlet that stops answering (SIGSTOP: its loop no longer sends
	// WATCHDOG=1) is killed by systemd's watchdog and restarted, and the
	// new one adopts the pod as it is.
	oldPID, restarts := m.show("MainPID"), m.show("NRestarts")
	if out, err := m.run("systemctl", "kill", "--kill-whom=main", "--signal=SIGSTOP", "staticlet"); err != nil {
		t.Fatalf("SIGSTOP to staticlet's MainPID %s: %v\n%s", oldPID, err, out)
	}
	harness.WaitFor(t, 90*time.Second, "systemd to restart staticlet after a watchdog timeout", func() (bool, string) {
		pid, n := m.show("MainPID"), m.show("NRestarts")
		status := m.status()
		return n != restarts && pid != oldPID && pid != "0" && strings.Contains(status, "Active: active (running)") &&
			strings.Contains(status, wantStatus), fmt.Sprintf("MainPID %s NRestarts %s (before: %s, %s)\n%s", pid, n, oldPID, restarts, status)
	})
	t.Logf("restarted by the watchdog: MainPID %s -> %s, NRestarts %s -> %s", oldPID, m.show("MainPID"), restarts, m.show("NRestarts"))
	if out, _ := m.run("journalctl", "-u", "staticlet", "-o", "cat", "--no-pager"); !strings.Contains(out, "Watchdog timeout") {
		t.Errorf("journalctl -u staticlet has no watchdog timeout:\n%s", debroot.LastLines(out, 20))
	}
	after := m.pod(name)
	if len(after.Status.ContainerStatuses) != 1 {
		t.Fatalf("pod %s after the restart: %s; want one container", name, harness.Describe(after))
	}
	afterID, afterPID := task(e, t, after.Status.ContainerStatuses[0])
	if afterID != id || afterPID != pid || after.UID != before.UID ||
		after.Status.ContainerStatuses[0].RestartCount != before.Status.ContainerStatuses[0].RestartCount {
		t.Errorf("after staticlet's restart: container %s, task pid %d, uid %s, restarts %d; want it untouched: %s, %d, %s, %d",
			afterID, afterPID, after.UID, after.Status.ContainerStatuses[0].RestartCount,
			id, pid, before.UID, before.Status.ContainerStatuses[0].RestartCount)
	}
	// Stopping staticlet with the machine leaves the pod running.
	m.Poweroff(60 * time.Second)
	if !harness.ProcessRunning(pid) {
		t.Errorf("container %s (pid %d) stopped with the machine; want it left running", id, pid)
	}
}

// pod returns pod name as staticlet get pods -o json inside reports it.
func (m *staticletMachine) pod(name string) *v1.Pod {
	m.t.Helper()
	p, err := m.findPod(name)
	if err != nil {
		m.t.Fatal(err)
	}
	return p
}

// task returns the ID and the running task's PID, from containerd, of the
// container a status names.
func task(e *harness.Env, t *testing.T, cs v1.ContainerStatus) (string, int) {
	t.Helper()
	id := strings.TrimPrefix(cs.ContainerID, "containerd://")
	pid, err := e.PidOf(cs)
	if err != nil {
		t.Fatalf("the task of container %s in containerd: %v", cs.Name, err)
	}
	if !harness.ProcessRunning(pid) {
		t.Fatalf("container %s: task pid %d is not running", cs.Name, pid)
	}
	return id, pid
}
