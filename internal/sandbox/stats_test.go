package sandbox

import (
	"reflect"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/typeurl/v2"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticlet/staticlet/internal/pod"
)

func TestTopNanoCores(t *testing.T) {
	tests := []struct {
		name       string
		start, end uint64
		window     time.Duration
		want       uint64
	}{
		{"one core", 1e9, 2e9, time.Second, 1e9},
		{"a quarter over 2s", 0, 5e8, 2 * time.Second, 25e7},
		{"idle", 7, 7, time.Second, 0},
		{"counter went back", 9e9, 1e9, time.Second, 0},
		{"no window", 0, 1e9, 0, 0},
		{"a busy year", 0, 365 * 24 * 3600 * 1e9, time.Second, 365 * 24 * 3600 * 1e9},
	}
	for _, tt := range tests {
		if got := nanoCores(tt.start, tt.end, tt.window); got != tt.want {
			t.Errorf("%s: nanoCores(%d, %d, %v) = %d, want %d", tt.name, tt.start, tt.end, tt.window, got, tt.want)
		}
	}
}

// container is a listed container of pod ns/name with cgroupsPath.
func container(t *testing.T, ns, name, kind, cname, cgroupsPath string) containers.Container {
	t.Helper()
	a, err := typeurl.MarshalAny(&specs.Spec{Linux: &specs.Linux{CgroupsPath: cgroupsPath}})
	if err != nil {
		t.Fatal(err)
	}
	return containers.Container{
		Labels: map[string]string{LabelPodNamespace: ns, LabelPodName: name, LabelKind: kind, LabelContainer: cname},
		Spec:   a,
	}
}

func TestTopUsageTargets(t *testing.T) {
	web := pod.Key{Namespace: "default", Name: "web"}
	listed := []containers.Container{
		container(t, "default", "web", "sandbox", "", "/staticlet/burstable/pod1/sb"),
		container(t, "default", "web", "app", "nginx", "/staticlet/burstable/pod1/c1"),
		container(t, "default", "etcd", "app", "etcd", "staticlet-pod2.slice:staticlet:c2"),
		container(t, "default", "old", "app", "gone", ""),
	}
	etcd := pod.Key{Namespace: "default", Name: "etcd"}
	tests := []struct {
		name       string
		podCgroups bool
		want       []usageTarget
	}{
		{"pod cgroups, both drivers", true, []usageTarget{
			{pod: web, kind: pod.KindSandbox, rel: "/staticlet/burstable/pod1/sb"},
			{pod: web, podLevel: true, rel: "/staticlet/burstable/pod1"},
			{pod: web, container: "nginx", kind: pod.KindApp, rel: "/staticlet/burstable/pod1/c1"},
			{pod: etcd, container: "etcd", kind: pod.KindApp, rel: "/staticlet.slice/staticlet-pod2.slice/staticlet-c2.scope"},
			{pod: etcd, podLevel: true, rel: "/staticlet.slice/staticlet-pod2.slice"},
		}},
		{"no pod cgroups", false, []usageTarget{
			{pod: web, kind: pod.KindSandbox, rel: "/staticlet/burstable/pod1/sb"},
			{pod: web, container: "nginx", kind: pod.KindApp, rel: "/staticlet/burstable/pod1/c1"},
			{pod: etcd, container: "etcd", kind: pod.KindApp, rel: "/staticlet.slice/staticlet-pod2.slice/staticlet-c2.scope"},
		}},
	}
	for _, tt := range tests {
		if got := usageTargets(listed, tt.podCgroups); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: usageTargets = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestTopPodUsages(t *testing.T) {
	web := pod.Key{Namespace: "default", Name: "web"}
	db := pod.Key{Namespace: "a", Name: "db"}
	sb := usageTarget{pod: web, kind: pod.KindSandbox, rel: "/p1/sb"}
	app := usageTarget{pod: web, container: "app", kind: pod.KindApp, rel: "/p1/app"}
	initC := usageTarget{pod: web, container: "init", kind: pod.KindInit, rel: "/p1/init"}
	exited := usageTarget{pod: web, container: "exited", kind: pod.KindApp, rel: "/p1/exited"}
	podWeb := usageTarget{pod: web, podLevel: true, rel: "/p1"}
	dbApp := usageTarget{pod: db, container: "db", kind: pod.KindApp, rel: "/p2/db"}
	first := map[usageTarget]uint64{sb: 0, app: 1e9, initC: 0, podWeb: 5e9, dbApp: 0}
	second := map[usageTarget]cgroupUsage{
		sb:     {cpu: 0, workingSet: 1 << 20},
		app:    {cpu: 2e9, workingSet: 10 << 20},
		initC:  {cpu: 5e8, workingSet: 2 << 20},
		podWeb: {cpu: 7e9, workingSet: 20 << 20},
		dbApp:  {cpu: 25e7, workingSet: 3 << 20},
	}
	tests := []struct {
		name    string
		targets []usageTarget
		want    []PodUsage
	}{
		{"pod cgroups", []usageTarget{sb, app, initC, exited, podWeb, dbApp}, []PodUsage{
			{Pod: db, CPUNanoCores: 25e7, WorkingSetBytes: 3 << 20, Containers: []ContainerUsage{{"db", 25e7, 3 << 20}}},
			{Pod: web, CPUNanoCores: 2e9, WorkingSetBytes: 20 << 20, Containers: []ContainerUsage{
				{"app", 1e9, 10 << 20}, {"init", 5e8, 2 << 20},
			}},
		}},
		{"summed without pod cgroups", []usageTarget{sb, app, initC, exited, dbApp}, []PodUsage{
			{Pod: db, CPUNanoCores: 25e7, WorkingSetBytes: 3 << 20, Containers: []ContainerUsage{{"db", 25e7, 3 << 20}}},
			{Pod: web, CPUNanoCores: 15e8, WorkingSetBytes: 13 << 20, Containers: []ContainerUsage{
				{"app", 1e9, 10 << 20}, {"init", 5e8, 2 << 20},
			}},
		}},
	}
	for _, tt := range tests {
		if got := podUsages(tt.targets, first, second, time.Second); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: podUsages = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
