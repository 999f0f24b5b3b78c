package systemd

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/debroot"
	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// TestSystemdNodeShutdown: under the real systemd and systemd-logind of a
// booted Debian, staticlet with --shutdown-grace-period holds a delay
// inhibitor lock that systemd-inhibit lists, raises logind's
// InhibitDelayMaxSec to the grace period, and when `systemctl poweroff`
// asks logind to power off (which announces PrepareForShutdown and waits
// for the lock), even after logind's restart, stops the regular pod before the critical one and then
// lets the machine go down.
func TestSystemdNodeShutdown(t *testing.T) {
	requireMachineTools(t)
	journalctl, err := exec.LookPath("journalctl")
	if err != nil {
		t.Fatalf("reading the machine's journal needs journalctl on the host: %v", err)
	}
	e := harness.NewEnv(t)
	// Under e.dir, which the machine has at the same path.
	dir := filepath.Join(e.Dir, "marks")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	// The regular pod's preStop hook takes 2s: a critical pod stopped
	// alongside it would write its line first.
	m := bootStaticlet(t, e, staticletOptions{
		Args:      []string{"--shutdown-grace-period=20s", "--shutdown-grace-period-critical-pods=8s"},
		Manifests: harness.ShutdownPods(dir, 2),
	})
	for _, name := range []string{"web-" + harness.TestNode, "etcd-" + harness.TestNode} {
		harness.WaitFor(t, 90*time.Second, name+" running", func() (bool, string) {
			p, err := m.findPod(name)
			if err != nil {
				return false, err.Error()
			}
			return harness.Running(p), harness.Describe(p)
		})
	}

	// The lock, as logind lists it.
	waitLock := func(what string) {
		t.Helper()
		harness.WaitFor(t, 30*time.Second, what, func() (bool, string) {
			out, _ := m.run("systemd-inhibit", "--list", "--no-pager")
			return hasInhibitor(out, "staticlet", "shutdown", "delay"), out
		})
	}
	waitLock("staticlet's delay lock in systemd-inhibit --list")
	// logind's default InhibitDelayMaxSec (5s) raised to the 20s grace
	// period by the drop-in.
	dropIn, err := os.ReadFile(filepath.Join(m.root, "/etc/systemd/logind.conf.d/99-staticlet-shutdown.conf"))
	if err != nil || !strings.Contains(string(dropIn), "InhibitDelayMaxSec=20\n") {
		t.Errorf("logind's drop-in: %q, %v; want InhibitDelayMaxSec=20", dropIn, err)
	}
	if out, err := m.run("busctl", "get-property", "org.freedesktop.login1", "/org/freedesktop/login1",
		"org.freedesktop.login1.Manager", "InhibitDelayMaxUSec"); strings.TrimSpace(out) != "t 20000000" {
		t.Errorf("logind's InhibitDelayMaxUSec = %q, %v; want t 20000000", out, err)
	}

	// logind restarted (as an upgrade of systemd may do) keeps the lock:
	// it reopens the locks it saved under /run/systemd/inhibit, and the
	// signal still reaches staticlet, whose match names logind's bus
	// name, not its connection.
	logindPID := m.logindPID()
	if out, err := m.run("systemctl", "restart", "systemd-logind"); err != nil {
		t.Fatalf("systemctl restart systemd-logind: %v\n%s", err, out)
	}
	if pid := m.logindPID(); pid == logindPID {
		t.Fatalf("systemd-logind's MainPID is %s after its restart, as before", pid)
	}
	waitLock("staticlet's delay lock listed after logind's restart")

	start := time.Now()
	m.Poweroff(90 * time.Second)
	t.Logf("the machine powered off %s after systemctl poweroff", time.Since(start).Round(100*time.Millisecond))
	harness.WantShutdownOrder(t, dir)
	e.WantNoTaskRunning(t)

	// The machine's persistent journal: logind was asked (so the
	// shutdown went through PrepareForShutdown), staticlet stopped the
	// pods, then released the lock.
	journal := func(args ...string) string {
		args = append([]string{"--directory=" + filepath.Join(m.root, "/var/log/journal"), "-o", "cat", "--no-pager"}, args...)
		out, err := exec.Command(journalctl, args...).CombinedOutput()
		if err != nil {
			t.Errorf("journalctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := journal("-u", "systemd-logind"); !strings.Contains(out, "System is powering down") {
		t.Errorf("logind's journal has no \"System is powering down\": the poweroff did not go through logind\n%s", debroot.LastLines(out, 20))
	}
	out := journal("-t", "staticlet")
	for _, want := range []string{
		// One pod in each group, each group with its share of the 20s.
		`regular=1 critical=1 "regular grace"=12s "critical grace"=8s`,
		"pods stopped for the node shutdown",
		"released logind's inhibitor lock: the shutdown goes on",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("staticlet's journal has no %q:\n%s", want, debroot.LastLines(out, 20))
		}
	}
	// A shutdown as planned, the bus and staticlet stopped after the
	// pods, is nothing to warn about. The machine's /proc/sys is
	// read-only, as nspawn mounts it: that hostPorts do not answer on
	// 127.0.0.1 there is said, and is no part of the shutdown.
	var warnings []string
	for _, line := range strings.Split(strings.TrimSpace(journal("-t", "staticlet", "-p", "warning")), "\n") {
		if line != "" && !strings.Contains(line, "hostPorts will not answer on 127.0.0.1") {
			warnings = append(warnings, line)
		}
	}
	if len(warnings) > 0 {
		t.Errorf("staticlet's journal has warnings:\n%s", strings.Join(warnings, "\n"))
	}
}

// logindPID is systemd-logind's MainPID in the machine.
func (m *staticletMachine) logindPID() string {
	m.t.Helper()
	out, err := m.run("systemctl", "show", "--value", "-p", "MainPID", "systemd-logind")
	if err != nil {
		m.t.Fatalf("systemctl show -p MainPID systemd-logind: %v\n%s", err, out)
	}
	return strings.TrimSpace(out)
}

// hasInhibitor tells whether the table of systemd-inhibit --list has a
// lock taken by who for what, in mode.
func hasInhibitor(list, who, what, mode string) bool {
	for _, line := range strings.Split(list, "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[0] == who && f[len(f)-1] == mode && strings.Contains(line, " "+what+" ") {
			return true
		}
	}
	return false
}

// findPod returns pod name as staticlet get pods -o json inside reports it.
func (m *staticletMachine) findPod(name string) (*v1.Pod, error) {
	out, err := m.run("staticlet", "get", "pods", name, "-o", "json")
	if err != nil {
		return nil, fmt.Errorf("staticlet get pods %s -o json: %v: %s", name, err, out)
	}
	var p v1.Pod
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		return nil, fmt.Errorf("staticlet get pods %s -o json: %v: %s", name, err, out)
	}
	return &p, nil
}
