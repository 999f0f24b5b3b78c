package kubeapi

import (
	"context"
	"testing"
	"time"

	"github.com/staticlet/staticlet/internal/status"
	"github.com/staticlet/staticlet/internal/testutil/kubetools"
)

// kubeconfig writes a kubeconfig for api as the admin.
func (a *testAPI) kubeconfig(t *testing.T) string {
	t.Helper()
	return kubeconfigFor(t, a.config)
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
	runKubectl(t, kubectl, kc, []kubectlCase{
		{[]string{"top", "pod", "-A"}, false, []string{"default       web    250m         64Mi", "kube-system   etcd   1m           100Mi"}},
		{[]string{"top", "pod", "--containers"}, false, []string{"web   app       200m         48Mi", "web   sidecar   50m          16Mi"}},
		{[]string{"top", "node"}, false, []string{"node1   1500m", "3072Mi"}},
		{[]string{"auth", "whoami"}, false, []string{"staticlet-admin", "system:masters"}},
		{[]string{"auth", "can-i", "get", "pods"}, false, []string{"yes"}},
		{[]string{"auth", "can-i", "delete", "pods"}, true, []string{"no - " + readOnlyReason}},
		{[]string{"auth", "can-i", "--list"}, false, []string{"pods.metrics.k8s.io", "[get list]", "[/version]"}},
	})
}
