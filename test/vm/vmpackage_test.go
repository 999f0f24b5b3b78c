package vm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/staticlet/staticlet/internal/testutil/debroot"
	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// The packaged staticlet on a real node: TestVM installs the .deb into the
// guest, where the guest's systemd starts it (Type=notify) against the
// guest's own containerd, with the systemd cgroup driver and a graceful
// node shutdown, and the guest's power-off at the end goes through logind.
// Its pods use their own containerd namespace (so their slice is
// pkg.slice) and the host's network, out of the way of the Go tests that
// run in the guest meanwhile.

// vmPackagePods are the installed staticlet's pods: each says on the
// guest's second serial port, which the host reads, when it gets SIGTERM,
// so that the order of a node shutdown shows after the guest is gone.
const vmPackagePods = `apiVersion: v1
kind: Pod
metadata:
  name: regular
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 10
  containers:
  - name: main
    image: localhost/busybox:test
    command: ["sh", "-c", "trap 'echo pkg-regular: SIGTERM >/tty; sleep 2; echo pkg-regular: done >/tty; exit 0' TERM; while true; do sleep 1; done"]
    securityContext: {privileged: true}
    volumeMounts: [{name: tty, mountPath: /tty}]
    readinessProbe:
      exec: {command: ["true"]}
      periodSeconds: 10
    resources:
      requests: {memory: 16Mi}
      limits: {memory: 64Mi}
  volumes:
  - {name: tty, hostPath: {path: /dev/ttyS1, type: CharDevice}}
---
apiVersion: v1
kind: Pod
metadata:
  name: critical
  namespace: kube-system
spec:
  hostNetwork: true
  priorityClassName: system-node-critical
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: localhost/busybox:test
    command: ["sh", "-c", "trap 'echo pkg-critical: SIGTERM >/tty; exit 0' TERM; while true; do sleep 1; done"]
    securityContext: {privileged: true}
    resources:
      limits: {cpu: 100m, memory: 32Mi}
    volumeMounts: [{name: tty, mountPath: /tty}]
  volumes:
  - {name: tty, hostPath: {path: /dev/ttyS1, type: CharDevice}}
`

// vmPackageScript installs and configures the package, waits for its
// sd_notify status to count both pods ready, and records what systemd
// says of it in $RESULTS.
const vmPackageScript = `
dpkg -i ./staticlet.deb >"$RESULTS/pkg-install" 2>&1 || echo "dpkg -i failed: $?" >>"$RESULTS/pkg-install"
sed -i -e 's/^cgroupDriver: cgroupfs/cgroupDriver: systemd/' \
	-e 's/^shutdownGracePeriod: 0s/shutdownGracePeriod: 20s/' \
	-e 's/^shutdownGracePeriodCriticalPods: 0s/shutdownGracePeriodCriticalPods: 8s/' /etc/staticlet/config.yaml
echo 'STATICLET_ARGS="--containerd-namespace=pkg"' >/etc/default/staticlet
mkdir -p /var/lib/staticlet/images
cp busybox.tar /var/lib/staticlet/images/
cp pods.yaml /etc/kubernetes/manifests/
systemctl restart staticlet
for i in $(seq 1 300); do
	case "$(systemctl show -p StatusText --value staticlet)" in "2 pods: 2 running, 2 ready"*) break ;; esac
	sleep 1
done
systemctl show -p Type -p ActiveState -p SubState -p StatusText staticlet >"$RESULTS/pkg-show"
systemctl status --no-pager staticlet >"$RESULTS/pkg-status" 2>&1
systemd-cgls --no-pager /pkg.slice >"$RESULTS/pkg-cgls" 2>&1
systemd-inhibit --list --no-pager >"$RESULTS/pkg-inhibit" 2>&1
staticlet get pods >"$RESULTS/pkg-pods" 2>&1
`

// vmPackageFiles are the files the package test hands the guest.
func vmPackageFiles(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	archive := filepath.Join(dir, "busybox.tar")
	if err := os.WriteFile(archive, harness.ImageArchive(t, "localhost/busybox:test", true, ""), 0o644); err != nil {
		t.Fatal(err)
	}
	pods := filepath.Join(dir, "pods.yaml")
	if err := os.WriteFile(pods, []byte(vmPackagePods), 0o644); err != nil {
		t.Fatal(err)
	}
	return map[string]string{"staticlet.deb": harness.DebPackage(t), "busybox.tar": archive, "pods.yaml": pods}
}

// checkVMPackage checks what the guest recorded of the package, and in
// its output the order in which the pods were stopped at its power-off.
func checkVMPackage(t *testing.T, results, output string) {
	t.Helper()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(results, name))
		if err != nil {
			t.Errorf("reading the guest's %s: %v", name, err)
		}
		return string(b)
	}
	show := read("pkg-show")
	for _, want := range []string{"Type=notify", "ActiveState=active", "SubState=running", "StatusText=2 pods: 2 running, 2 ready"} {
		if !strings.Contains(show, want+"\n") {
			t.Errorf("systemctl show staticlet in the guest lacks %s:\n%s\nstatus:\n%s\ninstall:\n%s", want, show, read("pkg-status"), read("pkg-install"))
		}
	}
	cgls := read("pkg-cgls")
	for _, want := range []string{"pkg-burstable.slice", "pkg-burstable-pod", "pkg-pod", ".scope"} {
		if !strings.Contains(cgls, want) {
			t.Errorf("systemd-cgls /pkg.slice in the guest does not show %s:\n%s", want, cgls)
		}
	}
	if inhibit := read("pkg-inhibit"); !strings.Contains(inhibit, "staticlet") || !strings.Contains(inhibit, "delay") {
		t.Errorf("systemd-inhibit --list in the guest shows no delay lock of staticlet's:\n%s", inhibit)
	}
	// The guest's power-off went through logind, which waited for
	// staticlet: the regular pod stopped, then the critical one.
	order := []string{"pkg-regular: SIGTERM", "pkg-regular: done", "pkg-critical: SIGTERM"}
	at := 0
	for _, want := range order {
		i := strings.Index(output[at:], want)
		if i < 0 {
			t.Errorf("the guest's output lacks %q after the shutdown began, want %q in that order:\n%s", want, order, debroot.LastLines(output, 30))
			break
		}
		at += i
	}
}
