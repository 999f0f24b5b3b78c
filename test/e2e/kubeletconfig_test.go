package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/cgroups"
	"github.com/staticlet/staticlet/internal/testutil/harness"
	"github.com/staticlet/staticlet/internal/testutil/kubeadm"
)

// kubeadmFile is the kubeadm-written KubeletConfiguration of
// internal/testutil/kubeadm with CONTAINERD, LOGS and PORT replaced.
func kubeadmFile(t testing.TB, containerd, logs string, port int) string {
	t.Helper()
	return kubeadm.KubeletConfig(containerd, logs, port)
}

// TestKubeletConfigFile runs staticlet from a KubeletConfiguration as
// kubeadm writes it: its staticPodPath's pods run, the fields without
// meaning here are named in one warning, /healthz answers on its port,
// evictionHard's signals without effect here are named once.
func TestKubeletConfigFile(t *testing.T) {
	e := harness.NewEnv(t)
	port := harness.FreePort(t)
	file := filepath.Join(e.Dir, "kubelet-config.yaml")
	content := kubeadmFile(t, e.Ctrd.Address, e.Logs, port)
	if !cgroups.SystemdBooted() {
		// The systemd driver needs systemd: TestCgroupDriverNeedsSystemd.
		content = strings.Replace(content, "cgroupDriver: systemd", "cgroupDriver: cgroupfs", 1)
	}
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	e.Write("web.yaml", harness.SleeperPod("web", "cfg", false))
	// No --manifest-dir, --containerd-address or --pod-logs-dir: those
	// come from the file.
	d := startFlags(e, append([]string{"run", "--config", file,
		"--root-dir", e.Root,
		"--node-name", harness.TestNode,
		"--log-level", "debug",
	}, e.Net.Flags()...))
	d.WaitPod("web-"+harness.TestNode, 60*time.Second, "pod from staticPodPath running", harness.Running)
	if _, err := os.Stat(e.Logs); err != nil {
		t.Errorf("podLogsDir %s from the file: %v", e.Logs, err)
	}

	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
	if err != nil {
		t.Fatalf("GET /healthz on the healthz port: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		t.Errorf("GET /healthz = %d %q, want 200 ok", resp.StatusCode, body)
	}
	if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/pods", port)); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET /pods on the healthz port = %d, want 404: only /healthz is served over TCP", resp.StatusCode)
		}
	}

	var warned, unwatched []string
	for _, line := range strings.Split(d.Out.String(), "\n") {
		if strings.Contains(line, "clusterDNS") {
			warned = append(warned, line)
		}
		if strings.Contains(line, "memory.available") {
			unwatched = append(unwatched, line)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "level=WARN") || strings.Contains(warned[0], "evictionHard") {
		t.Errorf("log lines naming clusterDNS: %q, want one warning, which does not name evictionHard (honoured)", warned)
	}
	// evictionHard's nodefs.available is honoured; memory.available has
	// no effect, said once.
	if len(unwatched) != 1 || !strings.Contains(unwatched[0], "level=INFO") {
		t.Errorf("log lines naming memory.available: %q, want one at info", unwatched)
	}
	if strings.Contains(d.Out.String(), "cgroupDriver") {
		t.Errorf("staticlet warned about cgroupDriver:\n%s", d.Out.String())
	}
}

// TestCgroupDriverNeedsSystemd: the systemd driver where systemd is not
// the init system is refused at start, with the reason.
func TestCgroupDriverNeedsSystemd(t *testing.T) {
	if cgroups.SystemdBooted() {
		t.Skip("systemd is the init system here")
	}
	e := harness.NewEnv(t)
	cmd := exec.Command(harness.Binary(t), "run", "--manifest-dir", e.Manifest, "--containerd-address", e.Ctrd.Address,
		"--root-dir", e.Root, "--status-socket", filepath.Join(e.Dir, "s.sock"), "--cgroup-driver", "systemd")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "systemd cgroup driver needs systemd") {
		t.Errorf("staticlet run --cgroup-driver systemd without systemd: %v, want an error saying systemd is needed:\n%s", err, out)
	}
}

// startFlags runs staticlet with exactly args (plus the status socket),
// for tests whose settings come from elsewhere than the usual flags.
func startFlags(e *harness.Env, args []string) *harness.Daemon {
	e.T.Helper()
	d := e.NewDaemon()
	e.Launch(d, append(args, "--status-socket", d.Socket))
	return d
}
