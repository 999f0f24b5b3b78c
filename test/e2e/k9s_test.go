package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/testutil/harness"
	"github.com/staticlet/staticlet/internal/testutil/kubetools"
)

// TestK9s starts k9s in tmux against staticlet's API and waits for its
// pods view to show the node's pod.
func TestK9s(t *testing.T) {
	e := harness.NewEnv(t)
	d, _, kubeconfig := startWithAPI(t, e)
	bin := kubetools.K9s(t)
	e.Write("web.yaml", kubectlPod)
	web := "web-" + harness.TestNode
	d.WaitPod(web, 60*time.Second, "web running", harness.Running)
	s := kubetools.StartTmux(t, kubetools.TmuxConfig{
		Command: []string{bin, "--command", "pods", "--all-namespaces", "--headless", "--logoless"},
		Env:     kubetools.K9sEnv(t, kubeconfig),
	})
	screen := s.WaitFor(t, 90*time.Second, web)
	if !strings.Contains(screen, "Running") {
		t.Errorf("k9s's pods view:\n%s", screen)
	}
	t.Logf("k9s's pods view:\n%s", screen)
}
