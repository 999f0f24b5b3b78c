package kubeapi

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/staticlet/staticlet/internal/status"
)

// fakeStats is a StatsReader of two pods of the store, and one it no
// longer has; it answers at once.
func fakeStats(_ context.Context, window time.Duration) (*status.PodStatsList, error) {
	return &status.PodStatsList{Time: time.Now(), Window: window.String(), Pods: []status.PodStats{
		{Namespace: "default", Name: "web", Usage: status.Usage{CPUNanoCores: 250_000_000, MemoryWorkingSetBytes: 64 << 20},
			Containers: []status.ContainerStats{
				{Name: "app", Usage: status.Usage{CPUNanoCores: 200_000_000, MemoryWorkingSetBytes: 48 << 20}},
				{Name: "sidecar", Usage: status.Usage{CPUNanoCores: 50_000_000, MemoryWorkingSetBytes: 16 << 20}},
			}},
		{Namespace: "kube-system", Name: "etcd", Usage: status.Usage{CPUNanoCores: 1_000_000, MemoryWorkingSetBytes: 100 << 20},
			Containers: []status.ContainerStats{{Name: "etcd", Usage: status.Usage{CPUNanoCores: 1_000_000, MemoryWorkingSetBytes: 100 << 20}}}},
	}}, nil
}

func metricsAPI(t *testing.T, cfg Config) (*testAPI, *metricsclient.Clientset) {
	t.Helper()
	api := newTestAPI(t, cfg)
	api.store.SetPod(testPod("default", "web", "Running"))
	api.store.SetPod(testPod("kube-system", "etcd", "Running"))
	mc, err := metricsclient.NewForConfig(api.config)
	if err != nil {
		t.Fatal(err)
	}
	return api, mc
}

// TestPodMetrics: the metrics clientset that kubectl top pod uses reads
// each pod's containers' usage, in all namespaces or one, by label, and
// one by name.
func TestPodMetrics(t *testing.T) {
	_, mc := metricsAPI(t, Config{Stats: fakeStats})
	ctx := context.Background()
	list, err := mc.MetricsV1beta1().PodMetricses("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 {
		t.Fatalf("pod metrics of every namespace = %d items, want 2: %+v", len(list.Items), list.Items)
	}
	web := list.Items[0]
	if web.Name != "web" || web.Namespace != "default" || web.Window.Duration != metricsWindow || web.Timestamp.IsZero() || len(web.Containers) != 2 {
		t.Fatalf("pod metrics of web = %+v", web)
	}
	if c := web.Containers[0]; c.Name != "app" || c.Usage.Cpu().MilliValue() != 200 || c.Usage.Memory().Value() != 48<<20 {
		t.Errorf("container app's usage = %+v, want 200m and 48Mi", c)
	}
	if web.Labels["app"] != "web" {
		t.Errorf("pod metrics labels = %v, want the pod's", web.Labels)
	}

	list, err = mc.MetricsV1beta1().PodMetricses("kube-system").List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 || list.Items[0].Name != "etcd" {
		t.Fatalf("pod metrics of kube-system = %+v, %v; want etcd alone", list, err)
	}
	list, err = mc.MetricsV1beta1().PodMetricses("").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil || len(list.Items) != 1 || list.Items[0].Name != "web" {
		t.Fatalf("pod metrics with app=web = %+v, %v; want web alone", list, err)
	}
	m, err := mc.MetricsV1beta1().PodMetricses("kube-system").Get(ctx, "etcd", metav1.GetOptions{})
	if err != nil || m.Containers[0].Usage.Memory().Value() != 100<<20 {
		t.Fatalf("get etcd's metrics = %+v, %v", m, err)
	}
	if _, err := mc.MetricsV1beta1().PodMetricses("default").Get(ctx, "etcd", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get default/etcd's metrics: %v, want NotFound", err)
	}
	if _, err := mc.MetricsV1beta1().PodMetricses("").Watch(ctx, metav1.ListOptions{}); !apierrors.IsMethodNotSupported(err) {
		t.Errorf("watch pod metrics: %v, want MethodNotSupported", err)
	}
}

// TestNodeMetrics: kubectl top node's read of the node's usage, and the
// discovery it checks first.
func TestNodeMetrics(t *testing.T) {
	nodeUsage := func(ctx context.Context, window time.Duration) (status.Usage, error) {
		return status.Usage{CPUNanoCores: 1_500_000_000, MemoryWorkingSetBytes: 3 << 30}, nil
	}
	api, mc := metricsAPI(t, Config{Stats: fakeStats, NodeUsage: nodeUsage})
	ctx := context.Background()
	list, err := mc.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("node metrics = %+v, want one node", list.Items)
	}
	n := list.Items[0]
	if n.Name != "node1" || n.Usage.Cpu().MilliValue() != 1500 || n.Usage.Memory().Value() != 3<<30 || n.Timestamp.IsZero() {
		t.Errorf("node metrics = %+v", n)
	}

	groups, err := api.clientset(t).Discovery().ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range groups.Groups {
		found = found || (g.Name == "metrics.k8s.io" && g.PreferredVersion.Version == "v1beta1")
	}
	if !found {
		t.Errorf("discovery lacks metrics.k8s.io/v1beta1: %+v", groups.Groups)
	}
	res, err := api.clientset(t).Discovery().ServerResourcesForGroupVersion("metrics.k8s.io/v1beta1")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.APIResources {
		if len(r.Verbs) != 2 || r.Verbs[0] != "get" || r.Verbs[1] != "list" {
			t.Errorf("metrics.k8s.io %s verbs = %v, want get, list", r.Name, r.Verbs)
		}
	}
}

// TestMetricsUnavailable: without readers the group is not served, and a
// failed read is 503.
func TestMetricsUnavailable(t *testing.T) {
	_, mc := metricsAPI(t, Config{})
	ctx := context.Background()
	if _, err := mc.MetricsV1beta1().PodMetricses("").List(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod metrics without Stats: %v, want NotFound", err)
	}
	failing := func(context.Context, time.Duration) (*status.PodStatsList, error) {
		return nil, errors.New("no cgroups")
	}
	_, mc = metricsAPI(t, Config{Stats: failing})
	if _, err := mc.MetricsV1beta1().PodMetricses("").List(ctx, metav1.ListOptions{}); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("pod metrics with a failing read: %v, want ServiceUnavailable", err)
	}
}

// TestNodeDevices: the node served counts the CDI devices in its
// capacity and allocatable, beside the machine's resources.
func TestNodeDevices(t *testing.T) {
	devs := func() status.DeviceList {
		return status.DeviceList{Devices: []status.Device{
			{Name: "example.test/dev=0", Kind: "example.test/dev"}, {Name: "example.test/dev=1", Kind: "example.test/dev"},
		}}
	}
	api := newTestAPI(t, Config{Devices: devs})
	api.store.SetNode(v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1"}, Status: v1.NodeStatus{
		Capacity: v1.ResourceList{v1.ResourceCPU: apiresource.MustParse("4")},
	}})
	n, err := api.clientset(t).CoreV1().Nodes().Get(context.Background(), "node1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q := n.Status.Capacity["example.test/dev"]; q.Value() != 2 || n.Status.Capacity.Cpu().Value() != 4 {
		t.Errorf("capacity = %v, want cpu 4 and example.test/dev 2", n.Status.Capacity)
	}
	if q := n.Status.Allocatable["example.test/dev"]; q.Value() != 2 {
		t.Errorf("allocatable = %v, want example.test/dev 2", n.Status.Allocatable)
	}
}
