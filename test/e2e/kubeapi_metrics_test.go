package e2e

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/staticlet/staticlet/internal/testutil/harness"
)

// TestKubeAPIMetrics: through the API, the node is the machine's (its
// capacity, runtime, API port), kubectl top's metrics read a running
// pod's and the node's usage, and can-i answers from what is served.
func TestKubeAPIMetrics(t *testing.T) {
	e := harness.NewEnv(t)
	_, cfg, _ := startWithAPI(t, e)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := metricsclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	n, err := cs.CoreV1().Nodes().Get(ctx, harness.TestNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	if port := strconv.Itoa(int(n.Status.DaemonEndpoints.KubeletEndpoint.Port)); port != u.Port() {
		t.Errorf("kubeletEndpoint port = %s, want the API's %s", port, u.Port())
	}
	if n.Status.Capacity.Cpu().IsZero() || n.Status.Capacity.Memory().IsZero() || n.Status.Allocatable.Cpu().IsZero() ||
		!strings.HasPrefix(n.Status.NodeInfo.ContainerRuntimeVersion, "containerd://") || n.Status.NodeInfo.BootID == "" {
		t.Errorf("node status = %+v", n.Status)
	}

	e.Write("top.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: top
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: localhost/busybox:test
    command: ["sleep", "3600"]
`)
	name := "top-" + harness.TestNode
	harness.WaitFor(t, 60*time.Second, "the pod's metrics, with its container's", func() (bool, string) {
		m, err := mc.MetricsV1beta1().PodMetricses("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(m.Containers) == 1 && m.Containers[0].Name == "main" && !m.Containers[0].Usage.Memory().IsZero(),
			"containers: " + strconv.Itoa(len(m.Containers))
	})
	nodes, err := mc.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 1 || nodes.Items[0].Name != harness.TestNode || nodes.Items[0].Usage.Memory().IsZero() {
		t.Errorf("node metrics = %+v, %v", nodes, err)
	}

	review, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "delete", Resource: "pods"}},
	}, metav1.CreateOptions{})
	if err != nil || review.Status.Allowed || !strings.Contains(review.Status.Reason, "read-only") {
		t.Errorf("can-i delete pods = %+v, %v; want no, read-only", review, err)
	}
}
