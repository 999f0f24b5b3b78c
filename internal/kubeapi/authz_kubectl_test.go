package kubeapi

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/staticlet/staticlet/internal/kubeapi/pki"
	"github.com/staticlet/staticlet/internal/testutil/kubetools"
)

// kubeconfigFor writes a kubeconfig with c's server and credentials.
func kubeconfigFor(t *testing.T, c *rest.Config) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["staticlet"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CAData}
	cfg.AuthInfos["staticlet"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.CertData, ClientKeyData: c.KeyData}
	cfg.Contexts["staticlet"] = &clientcmdapi.Context{Cluster: "staticlet", AuthInfo: "staticlet"}
	cfg.CurrentContext = "staticlet"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestKubectlViewer: a real kubectl with a viewer's kubeconfig lists
// pods, is told it may not get Secrets, and is refused exec.
func TestKubectlViewer(t *testing.T) {
	kubectl := kubetools.Kubectl(t)
	api := newPKIAPI(t, Config{})
	api.store.SetPod(testPod("default", "web", "Running"))
	kc := kubeconfigFor(t, api.as(t, "dash", pki.ViewerGroup))
	runKubectl(t, kubectl, kc, []kubectlCase{
		{[]string{"get", "pods"}, false, []string{"web", "Running"}},
		{[]string{"auth", "whoami"}, false, []string{"dash", pki.ViewerGroup}},
		{[]string{"auth", "can-i", "get", "pods"}, false, []string{"yes"}},
		{[]string{"auth", "can-i", "get", "secrets"}, true, []string{"no"}},
		{[]string{"auth", "can-i", "create", "pods/exec"}, true, []string{"no"}},
		{[]string{"get", "secrets"}, true, []string{"Forbidden", `User "dash" cannot list resource "secrets"`}},
		{[]string{"exec", "web", "--", "true"}, true, []string{"Forbidden", `User "dash" cannot`, `"pods/exec"`}},
	})
}

// kubectlCase is a kubectl command line, whether it fails, and what its
// output holds.
type kubectlCase struct {
	args  []string
	fails bool
	want  []string
}

// runKubectl runs kubectl with the kubeconfig kc for each case.
func runKubectl(t *testing.T, kubectl, kc string, cases []kubectlCase) {
	t.Helper()
	for _, tc := range cases {
		cmd := exec.Command(kubectl, append([]string{"--kubeconfig", kc, "--cache-dir", t.TempDir()}, tc.args...)...)
		cmd.Env = []string{"HOME=" + t.TempDir()}
		out, err := cmd.CombinedOutput()
		if (err != nil) != tc.fails {
			t.Errorf("kubectl %s: %v, want failure %t\n%s", strings.Join(tc.args, " "), err, tc.fails, out)
			continue
		}
		for _, want := range tc.want {
			if !strings.Contains(string(out), want) {
				t.Errorf("kubectl %s lacks %q:\n%s", strings.Join(tc.args, " "), want, out)
			}
		}
	}
}
