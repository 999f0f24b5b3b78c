package kubetools

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKubectlVersion builds kubectl (minutes the first time on a machine)
// and checks it reports KubectlVersion, which kubectl compares with the
// server's.
func TestKubectlVersion(t *testing.T) {
	kubectl := Kubectl(t)
	out, err := exec.CommandContext(t.Context(), kubectl, "version", "--client", "-o", "json").Output()
	if err != nil {
		t.Fatalf("kubectl version: %v", err)
	}
	var v struct {
		ClientVersion struct {
			Major, Minor, GitVersion string
		}
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("decoding kubectl version %s: %v", out, err)
	}
	got := v.ClientVersion
	if got.GitVersion != KubectlVersion || got.Major != "1" || got.Minor != "30" {
		t.Errorf("kubectl version --client = %+v, want %s (1.30)", got, KubectlVersion)
	}
}

// TestK9sVersion builds k9s (minutes the first time on a machine) and
// checks it reports K9sVersion.
func TestK9sVersion(t *testing.T) {
	k9s := K9s(t)
	out, err := exec.CommandContext(t.Context(), k9s, "version", "--short").Output()
	if err != nil {
		t.Fatalf("k9s version: %v", err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	if fields["Version"] != K9sVersion {
		t.Errorf("k9s version --short printed %q, want Version %s", out, K9sVersion)
	}
}

// TestTmuxSession checks a command in a session gets its environment, is
// typed into, and its screen stays readable after it exits, until Close.
func TestTmuxSession(t *testing.T) {
	script := `echo "ready $GREETING"; read line; echo "got $line"`
	s := StartTmux(t, TmuxConfig{Command: []string{"sh", "-c", script}, Env: []string{"GREETING=hello"}, Width: 80, Height: 10})
	s.WaitFor(t, 30*time.Second, "ready hello")
	if err := s.SendKeys(t.Context(), "typed", "Enter"); err != nil {
		t.Fatal(err)
	}
	s.WaitFor(t, 30*time.Second, "got typed")
	waitExited(t, s)
	if screen, err := s.Capture(t.Context()); err != nil || !strings.Contains(screen, "got typed") {
		t.Errorf("Capture after the command exited = %q, %v; want its output", screen, err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := s.Capture(t.Context()); err == nil {
		t.Error("Capture after Close succeeded, want the session gone")
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// waitExited waits for s's command to exit.
func waitExited(t *testing.T, s *TmuxSession) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		exited, err := s.Exited(ctx)
		if exited {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("command still running after 30s (%v)", err)
		case <-tick.C:
		}
	}
}

// TestK9sInTmux checks k9s starts in a detached tmux session against a
// kubeconfig whose server is not there, and its screen can be read and
// typed into: what the end-to-end test of its pods view builds on.
func TestK9sInTmux(t *testing.T) {
	k9s := K9s(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(unreachableKubeconfig(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	s := StartTmux(t, TmuxConfig{Command: []string{k9s}, Env: K9sEnv(t, kubeconfig)})
	// Unable to reach the server, k9s shows the view of the kubeconfig's
	// contexts (listing them or not: k9s races its own retries), under its
	// header.
	screen := s.WaitFor(t, time.Minute, "<contexts>")
	if !strings.Contains(screen, "K9s Rev: "+K9sVersion) {
		t.Errorf("k9s's screen does not show its version %s:\n%s", K9sVersion, screen)
	}
	// k9s's help screen, as a keystroke reaching it proves.
	if err := s.SendKeys(t.Context(), "?"); err != nil {
		t.Fatal(err)
	}
	s.WaitFor(t, 30*time.Second, "RESOURCE")
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := s.Capture(t.Context()); err == nil {
		t.Error("Capture after Close succeeded, want the session gone")
	}
}

// unreachableKubeconfig is a kubeconfig whose one context, nowhere, names a
// loopback port nothing listens on.
func unreachableKubeconfig(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return `apiVersion: v1
kind: Config
clusters:
- name: nowhere
  cluster:
    server: https://` + addr + `
    insecure-skip-tls-verify: true
users:
- name: nobody
  user:
    token: none
contexts:
- name: nowhere
  context:
    cluster: nowhere
    user: nobody
current-context: nowhere
`
}
