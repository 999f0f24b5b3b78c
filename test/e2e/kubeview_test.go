package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/staticlet/staticlet/internal/testutil/harness"
	"github.com/staticlet/staticlet/internal/testutil/kubetools"
)

// TestKubectlViewer: `staticlet kubeconfig --view` against a running
// staticlet gives a kubeconfig with which kubectl lists pods and is
// refused Secrets.
func TestKubectlViewer(t *testing.T) {
	e := harness.NewEnv(t)
	startWithAPI(t, e)
	kubeconfig := filepath.Join(e.Dir, "viewer.kubeconfig")
	out, err := exec.Command(harness.Binary(t), "kubeconfig", "--root-dir", e.Root, "--view", "--user", "e2e-viewer", "-o", kubeconfig).CombinedOutput()
	if err != nil {
		t.Fatalf("staticlet kubeconfig --view: %v\n%s", err, out)
	}
	k := kubectl{t: t, bin: kubetools.Kubectl(t), kubeconfig: kubeconfig}
	k.must("get", "pods", "-A")
	if out := k.must("auth", "whoami"); !strings.Contains(out, "e2e-viewer") || !strings.Contains(out, "staticlet:viewers") {
		t.Errorf("kubectl auth whoami as the viewer:\n%s", out)
	}
	denied, err := k.run("get", "secrets", "-A")
	if err == nil || !strings.Contains(denied, `Error from server (Forbidden): secrets is forbidden: User "e2e-viewer" cannot list resource "secrets"`) {
		t.Errorf("kubectl get secrets as the viewer: %v\n%s", err, denied)
	}
}
