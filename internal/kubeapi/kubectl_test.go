package kubeapi

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/staticlet/staticlet/internal/status"
	"github.com/staticlet/staticlet/internal/testutil/kubetools"
)

// kubeconfig writes a kubeconfig for api as the admin.
func (a *testAPI) kubeconfig(t *testing.T) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["staticlet"] = &clientcmdapi.Cluster{Server: a.url, CertificateAuthorityData: a.config.CAData}
	cfg.AuthInfos["staticlet"] = &clientcmdapi.AuthInfo{ClientCertificateData: a.config.CertData, ClientKeyData: a.config.KeyData}
	cfg.Contexts["staticlet"] = &clientcmdapi.Context{Cluster: "staticlet", AuthInfo: "staticlet"}
	cfg.CurrentContext = "staticlet"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestKubectlTopAndAuth: a real kubectl's top, auth whoami and auth can-i
// against the API.
func TestKubectlTopAndAuth(t *testing.T) {
	kubectl := kubetools.Kubectl(t)
	nodeUsage := func(context.Context, time.Duration) (status.Usage, error) {
		return status.Usage{CPUNanoCores: 1_500_000_000, MemoryWorkingSetBytes: 3 << 30}, nil
	}
	api, _ := metricsAPI(t, Config{Stats: fakeStats, NodeUsage: nodeUsage})
	kc := api.kubeconfig(t)
	for _, tc := range []struct {
		args  []string
		fails bool
		want  []string
	}{
		{[]string{"top", "pod", "-A"}, false, []string{"default       web    250m         64Mi", "kube-system   etcd   1m           100Mi"}},
		{[]string{"top", "pod", "--containers"}, false, []string{"web   app       200m         48Mi", "web   sidecar   50m          16Mi"}},
		{[]string{"top", "node"}, false, []string{"node1   1500m", "3072Mi"}},
		{[]string{"auth", "whoami"}, false, []string{"staticlet-admin", "system:masters"}},
		{[]string{"auth", "can-i", "get", "pods"}, false, []string{"yes"}},
		{[]string{"auth", "can-i", "delete", "pods"}, true, []string{"no - " + readOnlyReason}},
		{[]string{"auth", "can-i", "--list"}, false, []string{"pods.metrics.k8s.io", "[get list]", "[/version]"}},
	} {
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
