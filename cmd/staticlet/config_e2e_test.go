package main

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

	"github.com/staticlet/staticlet/internal/sandbox"
)

// kubeadmFile is the kubeadm-written KubeletConfiguration of
// internal/kubeletconfig's tests with CONTAINERD, LOGS and PORT replaced.
func kubeadmFile(t testing.TB, containerd, logs string, port int) string {
	t.Helper()
	data, err := os.ReadFile("../../internal/kubeletconfig/testdata/kubeadm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return strings.NewReplacer("CONTAINERD", containerd, "LOGS", logs, "PORT", fmt.Sprint(port)).Replace(string(data))
}

// TestKubeletConfigFile runs staticlet from a KubeletConfiguration as
// kubeadm writes it: its staticPodPath's pods run, the fields without
// meaning here are named in one warning, /healthz answers on its port.
func TestKubeletConfigFile(t *testing.T) {
	e := newEnv(t)
	port := freePort(t)
	file := filepath.Join(e.dir, "kubelet-config.yaml")
	content := kubeadmFile(t, e.ctrd.Address, e.logs, port)
	if !sandbox.SystemdBooted() {
		// The systemd driver needs systemd: TestCgroupDriverNeedsSystemd.
		content = strings.Replace(content, "cgroupDriver: systemd", "cgroupDriver: cgroupfs", 1)
	}
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	e.write("web.yaml", sleeperPod("web", "cfg", false))
	// No --manifest-dir, --containerd-address or --pod-logs-dir: those
	// come from the file.
	d := e.startFlags(append([]string{"run", "--config", file,
		"--root-dir", e.root,
		"--node-name", testNode,
		"--log-level", "debug",
	}, e.net.flags()...))
	d.waitPod("web-"+testNode, 60*time.Second, "pod from staticPodPath running", running)
	if _, err := os.Stat(e.logs); err != nil {
		t.Errorf("podLogsDir %s from the file: %v", e.logs, err)
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

	var warned []string
	for _, line := range strings.Split(d.out.String(), "\n") {
		if strings.Contains(line, "evictionHard") {
			warned = append(warned, line)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "level=WARN") || !strings.Contains(warned[0], "clusterDNS") {
		t.Errorf("log lines naming evictionHard: %q, want one warning (that also names clusterDNS)", warned)
	}
	if strings.Contains(d.out.String(), "cgroupDriver") {
		t.Errorf("staticlet warned about cgroupDriver:\n%s", d.out.String())
	}
}

// TestCgroupDriverNeedsSystemd: the systemd driver where systemd is not
// the init system is refused at start, with the reason.
func TestCgroupDriverNeedsSystemd(t *testing.T) {
	if sandbox.SystemdBooted() {
		t.Skip("systemd is the init system here")
	}
	e := newEnv(t)
	cmd := exec.Command(binary(t), "run", "--manifest-dir", e.manifest, "--containerd-address", e.ctrd.Address,
		"--root-dir", e.root, "--status-socket", filepath.Join(e.dir, "s.sock"), "--cgroup-driver", "systemd")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "systemd cgroup driver needs systemd") {
		t.Errorf("staticlet run --cgroup-driver systemd without systemd: %v, want an error saying systemd is needed:\n%s", err, out)
	}
}

// startFlags runs staticlet with exactly args (plus the status socket),
// for tests whose settings come from elsewhere than the usual flags.
func (e *env) startFlags(args []string) *daemon {
	e.t.Helper()
	d := e.newDaemon()
	e.launch(d, append(args, "--status-socket", d.socket))
	return d
}
