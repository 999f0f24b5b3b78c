package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

const secured = `apiVersion: v1
kind: Pod
metadata:
  name: secured
spec:
  terminationGracePeriodSeconds: 2
  securityContext:
    runAsUser: 1000
    runAsGroup: 3000
    supplementalGroups: [4000]
    fsGroup: 2000
    seccompProfile: {type: RuntimeDefault}
    sysctls:
    - {name: net.ipv4.ip_local_port_range, value: "20000 30000"}
  containers:
  - name: main
    image: localhost/busybox:test
    command: ["sh", "-c", "cat /proc/sys/net/ipv4/ip_local_port_range > /data/ports; touch /data/made; exec sleep 100000"]
    securityContext:
      readOnlyRootFilesystem: true
      allowPrivilegeEscalation: false
      capabilities: {drop: [ALL], add: [NET_BIND_SERVICE]}
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    emptyDir: {}
`

// TestSecurity checks a pod's security settings from the host: user and
// groups, capabilities, no_new_privs, seccomp, a read-only root, fsGroup on
// emptyDir, a sysctl; and that runAsNonRoot refuses an image running as
// root.
func TestSecurity(t *testing.T) {
	e := harness.NewEnv(t)
	d := e.Start()
	e.Write("secured.yaml", secured)
	p := d.WaitPod("secured-"+harness.TestNode, 30*time.Second, "running", harness.Running)
	pid, err := e.PidOf(p.Status.ContainerStatuses[0])
	if err != nil {
		t.Fatal(err)
	}
	status := procStatus(t, pid)
	for field, want := range map[string]string{
		"Uid":        "1000\t1000\t1000\t1000",
		"Gid":        "3000\t3000\t3000\t3000",
		"NoNewPrivs": "1",
		"Seccomp":    "2",
		// NET_BIND_SERVICE only; a non-root process holds it in its
		// bounding set, not its effective one, as under the kubelet.
		"CapBnd": fmt.Sprintf("%016x", uint64(1)<<10),
		"CapEff": "0000000000000000",
	} {
		if got := status[field]; got != want {
			t.Errorf("%s = %q, want %q", field, got, want)
		}
	}
	if groups := strings.Fields(status["Groups"]); !contains(groups, "2000") || !contains(groups, "4000") {
		t.Errorf("Groups = %q, want fsGroup 2000 and supplemental 4000", status["Groups"])
	}
	mounts, _ := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 5 && f[4] == "/" && !strings.HasPrefix(f[5], "ro") {
			t.Errorf("root mounted %s, want read-only", f[5])
		}
	}
	var volDir string
	harness.WaitFor(t, 5*time.Second, "the container's files in its emptyDir", func() (bool, string) {
		matches, _ := filepath.Glob(filepath.Join(e.Root, "pods", "*", "volumes", "empty-dir", "data", "made"))
		if len(matches) == 1 {
			volDir = filepath.Dir(matches[0])
		}
		return volDir != "", fmt.Sprint(matches)
	})
	var st syscall.Stat_t
	if err := syscall.Stat(volDir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Gid != 2000 || st.Mode&syscall.S_ISGID == 0 {
		t.Errorf("emptyDir gid %d mode %o, want gid 2000 (fsGroup) with setgid", st.Gid, st.Mode)
	}
	if err := syscall.Stat(filepath.Join(volDir, "made"), &st); err != nil || st.Gid != 2000 || st.Uid != 1000 {
		t.Errorf("file made in the emptyDir: uid %d gid %d (%v), want 1000:2000", st.Uid, st.Gid, err)
	}
	if b, _ := os.ReadFile(filepath.Join(volDir, "ports")); strings.Join(strings.Fields(string(b)), " ") != "20000 30000" {
		t.Errorf("net.ipv4.ip_local_port_range in the pod = %q, want 20000 30000", b)
	}

	// runAsNonRoot with an image whose user is root.
	e.Write("nonroot.yaml", strings.Replace(harness.SleeperPod("nonroot", "x", true), "spec:\n", "spec:\n  securityContext:\n    runAsNonRoot: true\n", 1))
	d.WaitPod("nonroot-"+harness.TestNode, 30*time.Second, "refused", func(p *v1.Pod) bool {
		w := p.Status.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == "CreateContainerConfigError" && strings.Contains(w.Message, "runAsNonRoot")
	})
}

// procStatus reads /proc/<pid>/status into a map.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
