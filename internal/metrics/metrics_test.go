package metrics

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticlet/staticlet/internal/pod"
	"github.com/staticlet/staticlet/internal/testutil/metricstest"
)

// scrape gets m's handler's answer, parsed.
func scrape(t *testing.T, m *Metrics) []metricstest.Sample {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics = %d %s", rec.Code, rec.Body)
	}
	samples, err := metricstest.Parse(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	return samples
}

// series is the value a series is expected to have, its labels as
// "name=value" pairs.
type series struct {
	name   string
	labels []string
	want   float64
}

// checkSeries checks that samples have the series in want.
func checkSeries(t *testing.T, samples []metricstest.Sample, want []series) {
	t.Helper()
	for _, tt := range want {
		if s, ok := metricstest.Find(samples, tt.name, tt.labels...); !ok || s.Value != tt.want {
			t.Errorf("%s%v = %v (found %v), want %v", tt.name, tt.labels, s.Value, ok, tt.want)
		}
	}
}

func ptime(t time.Time) metav1.Time { return metav1.NewTime(t) }

// testPods are one pod in each interesting state.
func testPods() []v1.Pod {
	now := time.Now()
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: ptime(now)}}
	exited := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}
	waiting := v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	creating := v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	pod := func(name string, phase v1.PodPhase, init []v1.ContainerStatus, cs ...v1.ContainerStatus) v1.Pod {
		return v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Status: v1.PodStatus{Phase: phase, InitContainerStatuses: init, ContainerStatuses: cs}}
	}
	return []v1.Pod{
		pod("web", v1.PodRunning, []v1.ContainerStatus{{Name: "init", State: exited, ContainerID: "containerd://i"}},
			v1.ContainerStatus{Name: "app", State: running, RestartCount: 2, ContainerID: "containerd://a"},
			v1.ContainerStatus{Name: "crash", State: waiting, LastTerminationState: exited, RestartCount: 5, ContainerID: "containerd://c"}),
		pod("new", "", nil, v1.ContainerStatus{Name: "app", State: creating}),
		pod("job", v1.PodSucceeded, nil, v1.ContainerStatus{Name: "app", State: exited, ContainerID: "containerd://j"}),
		pod("bad", v1.PodFailed, nil, v1.ContainerStatus{Name: "app", State: exited, ContainerID: "containerd://b"}),
		pod("made", v1.PodPending, nil, v1.ContainerStatus{Name: "app", State: creating, ContainerID: "containerd://m"}),
	}
}

// TestMetrics checks the gauges computed at scrape time from the pods and
// manifests, and the counters and histograms the other packages feed.
func TestMetrics(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m := New(Config{
		Version:        "v1.2.3",
		Pods:           testPods,
		ManifestErrors: func() map[string]int { return map[string]int{"dir:/m": 2, "url:http://x": 0} },
		NodeConditions: func() []v1.NodeCondition {
			return []v1.NodeCondition{{Type: v1.NodeDiskPressure, Status: v1.ConditionTrue}, {Type: v1.NodeReady, Status: v1.ConditionTrue}}
		},
		Devices: func() []DeviceCounts {
			return []DeviceCounts{{Kind: "example.test/dev", Free: 1, Allocated: 2}, {Kind: "example.test/cam", Shared: 1}}
		},
		Now: func() time.Time { return now },
	})
	key := pod.Key{Namespace: "kube-system", Name: "etcd-node"}
	probe := func(uid string, typ pod.ProbeType, ok bool) {
		m.ProbeRan(pod.ProbeRun{Pod: key, UID: uid, Container: "etcd", Type: typ, OK: ok, Took: time.Millisecond})
	}
	m.URLPolled("http://x/pods", 200)
	m.URLPolled("http://x/pods", 304)
	m.URLPolled("http://x/pods", 304)
	m.URLPolled("http://x/pods", 0)
	m.ImageImported(false)
	m.ImageImported(true)
	m.ImageImported(false)
	m.ImagePulled(time.Second, nil)
	m.ImagePulled(time.Second, errors.New("no such host"))
	m.ImageCollected("age", 1000)
	m.ImageCollected("age", 500)
	m.ImageCollected("space", 2000)

	seen := now.Add(-1500 * time.Millisecond).Format(time.RFC3339Nano)
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, UID: "u1",
		Annotations: map[string]string{pod.AnnotationSeen: seen}}}
	m.PodUpdated(p) // pending: not started
	probe("u1", pod.Liveness, true)
	p.Status.Phase = v1.PodRunning
	m.PodUpdated(p)
	m.PodUpdated(p) // the same pod again: counted once
	probe("u1", pod.Liveness, true)
	p = p.DeepCopy()
	p.UID = "u2" // the manifest changed: a new pod, u1's series go
	m.PodUpdated(p)
	probe("u2", pod.Liveness, true)
	probe("u2", pod.Readiness, false)

	samples := scrape(t, m)
	liveness := []string{"probe_type=Liveness", "pod=" + key.Name, "namespace=" + key.Namespace, "container=etcd"}
	checkSeries(t, samples, []series{
		{"prober_probe_total", []string{"probe_type=Liveness", "result=successful", "pod_uid=u2"}, 1},
		{"prober_probe_total", []string{"probe_type=Readiness", "result=failed"}, 1},
		{"prober_probe_duration_seconds", liveness, 3},
		{"staticlet_manifest_url_polls_total", []string{"url=http://x/pods", "code=200"}, 1},
		{"staticlet_manifest_url_polls_total", []string{"code=304"}, 2},
		{"staticlet_manifest_url_polls_total", []string{"code=error"}, 1},
		{"staticlet_image_imports_total", []string{"result=success"}, 2},
		{"staticlet_image_imports_total", []string{"result=failure"}, 1},
		{"staticlet_image_pulls_total", []string{"result=success"}, 1},
		{"staticlet_image_pulls_total", []string{"result=failure"}, 1},
		{"staticlet_image_pull_duration_seconds", nil, 2},
		{"kubelet_image_garbage_collected_total", []string{"reason=age"}, 2},
		{"kubelet_image_garbage_collected_total", []string{"reason=space"}, 1},
		{"staticlet_image_garbage_collected_bytes_total", []string{"reason=age"}, 1500},
		{"staticlet_image_garbage_collected_bytes_total", []string{"reason=space"}, 2000},
		{"kubelet_pod_start_duration_seconds", nil, 2},
		{"staticlet_node_status_condition", []string{"condition=DiskPressure", "status=true"}, 1},
		{"staticlet_node_status_condition", []string{"condition=DiskPressure", "status=false"}, 0},
		{"staticlet_node_status_condition", []string{"condition=Ready", "status=true"}, 1},
		{"kubelet_running_pods", nil, 1},
		{"kubelet_running_containers", []string{"container_state=running"}, 1},
		{"kubelet_running_containers", []string{"container_state=exited"}, 4},
		{"kubelet_running_containers", []string{"container_state=created"}, 1},
		{"kubelet_running_containers", []string{"container_state=unknown"}, 0},
		{"staticlet_pods", []string{"phase=Running"}, 1},
		{"staticlet_pods", []string{"phase=Pending"}, 2},
		{"staticlet_pods", []string{"phase=Succeeded"}, 1},
		{"staticlet_pods", []string{"phase=Failed"}, 1},
		{"staticlet_pods", []string{"phase=Unknown"}, 0},
		{"staticlet_container_restarts_total", []string{"pod=web", "container=app"}, 2},
		{"staticlet_container_restarts_total", []string{"pod=web", "container=crash"}, 5},
		{"staticlet_container_restarts_total", []string{"pod=web", "container=init"}, 0},
		{"staticlet_manifest_errors", []string{"source=dir:/m"}, 2},
		{"staticlet_manifest_errors", []string{"source=url:http://x"}, 0},
		{"staticlet_devices", []string{"kind=example.test/dev", "state=free"}, 1},
		{"staticlet_devices", []string{"kind=example.test/dev", "state=allocated"}, 2},
		{"staticlet_devices", []string{"kind=example.test/dev", "state=shared"}, 0},
		{"staticlet_devices", []string{"kind=example.test/cam", "state=free"}, 0},
		{"staticlet_devices", []string{"kind=example.test/cam", "state=shared"}, 1},
		{"staticlet_build_info", []string{"version=v1.2.3", "goversion=" + runtime.Version()}, 1},
	})
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "promhttp_metric_handler_requests_total"} {
		if _, ok := metricstest.Find(samples, name); !ok {
			t.Errorf("no %s: the Go, process and handler collectors are missing", name)
		}
	}
	if s, _ := metricstest.Find(samples, "staticlet_container_restarts_total"); s.Type != dto.MetricType_COUNTER {
		t.Errorf("staticlet_container_restarts_total is a %v, want a counter", s.Type)
	}
	if _, ok := metricstest.Find(samples, "prober_probe_total", "pod_uid=u1"); ok {
		t.Errorf("prober_probe_total has series of pod_uid u1, which u2 replaced")
	}
	if _, ok := metricstest.Find(samples, "prober_probe_duration_seconds", "probe_type=Readiness"); ok {
		t.Errorf("prober_probe_duration_seconds has a Readiness series: only successful runs are timed")
	}
	if s, _ := metricstest.Find(samples, "kubelet_pod_start_duration_seconds"); s.Sum != 3 {
		t.Errorf("kubelet_pod_start_duration_seconds sum = %v, want 3 (1.5 s twice)", s.Sum)
	}

	m.ForgetPod(key)
	samples = scrape(t, m)
	for _, name := range []string{"prober_probe_total", "prober_probe_duration_seconds"} {
		if _, ok := metricstest.Find(samples, name, "pod="+key.Name); ok {
			t.Errorf("%s still has series of pod %s after ForgetPod", name, key)
		}
	}

	// A probe of the pod run after all (it was stopping) makes its series
	// again, each from 0; so do the runs of the pod's UID again.
	probe("u2", pod.Liveness, true)
	m.PodUpdated(p)
	probe("u2", pod.Liveness, true)
	checkSeries(t, scrape(t, m), []series{
		{"prober_probe_total", []string{"probe_type=Liveness", "result=successful", "pod_uid=u2"}, 2},
		{"prober_probe_duration_seconds", liveness, 2},
	})
}

// TestMetricsHTTP checks the kubelet's HTTP server metrics: requests by
// method, first path segment (unknown ones as "other"), server and
// whether they are long-running.
func TestMetricsHTTP(t *testing.T) {
	m := New(Config{})
	h := m.InstrumentHTTP("socket", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, req := range []struct{ method, target string }{
		{"GET", "/pods"},
		{"GET", "/pods/web"},
		{"GET", "/pods/web/log?follow=true"},
		{"GET", "/healthz"},
		{"GET", "/no/such/thing"},
		{"BREW", "/pods"},
	} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(req.method, req.target, nil))
	}
	samples := scrape(t, m)
	checkSeries(t, samples, []series{
		{"kubelet_http_requests_total", []string{"method=GET", "path=pods", "server_type=socket", "long_running=false"}, 2},
		{"kubelet_http_requests_total", []string{"method=GET", "path=pods", "long_running=true"}, 1},
		{"kubelet_http_requests_total", []string{"method=GET", "path=healthz"}, 1},
		{"kubelet_http_requests_total", []string{"method=GET", "path=other"}, 1},
		{"kubelet_http_requests_total", []string{"method=other", "path=pods"}, 1},
		{"kubelet_http_requests_duration_seconds", []string{"method=GET", "path=pods", "long_running=false"}, 2},
		{"kubelet_http_inflight_requests", []string{"method=GET", "path=pods", "long_running=false"}, 0},
	})
}

// BenchmarkProbeRan is the cost of counting one probe run, which every
// container probed does every second or so.
func BenchmarkProbeRan(b *testing.B) {
	m := New(Config{})
	r := pod.ProbeRun{Pod: pod.Key{Namespace: "kube-system", Name: "etcd-node"}, UID: "0b4c6a5e-8f3d-4f4e-9a7e-6c2d1e0f9a8b",
		Container: "etcd", Type: pod.Liveness, OK: true, Took: time.Millisecond}
	b.ReportAllocs()
	for b.Loop() {
		m.ProbeRan(r)
	}
}
